// The wire codecs of every protocol revision the gateway speaks, each naming its revision's id: what holds of all
// of them together is derived here, so that a new revision's codec joins it with no edit elsewhere. It sits in the
// wire layer (the codecs' own), below the upstream side and the task core: the registry of whole revisions
// (revisions.ts) is far above, and the composition root hands what the layers below need (the method names of
// metrics) down to them.
// eslint.config.js loads this file too, for the wire field names its rule keeps inside the codecs.
import type { RevisionId } from './mcp.js';
import { codec as codec2025_11_25 } from './rev2025-11-25/codec.js';
import { codec as codec2026_07_28 } from './rev2026-07-28/codec.js';
import type { WireCodec } from './wire-codec.js';

/** Every revision's codec, newest first; the registry (revisions.ts) serves each of them (a unit test checks it). */
export const WIRE_CODECS: readonly WireCodec[] = [codec2026_07_28, codec2025_11_25];

/** The ids of the revisions the gateway speaks: the eras a task may be stored with. */
export const REVISION_IDS: readonly RevisionId[] = WIRE_CODECS.map((codec) => codec.revision);

/**
 * Every method MCP defines in the revisions the gateway speaks, either direction (requests and notifications):
 * what metrics may name as is; anything else a client sends is just "other" there.
 */
export const MCP_METHODS: ReadonlySet<string> = new Set(WIRE_CODECS.flatMap((codec) => codec.methods));

/** Every revision's wire field names, which only that revision's codec may name (eslint.config.js). */
export const WIRE_FIELDS: readonly string[] = [...new Set(WIRE_CODECS.flatMap((codec) => codec.wireFields))];
