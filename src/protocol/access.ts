// The access rules as both revisions' routers apply them to one caller: what lists show, whether a call may go
// upstream, and which stored tasks it may read. A denied call is answered as if the tool, prompt or resource did
// not exist (the caller learns nothing of it), and the denial is announced (access.denied: audited, counted).
import { mayUse, type AccessKind } from '../config/access.js';
import type { AccessRule } from '../config/types.js';
import type { GatewayEvents } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';
import type { Caller, TaskReader } from '../principals.js';
import type { ListKind } from '../mcp.js';
import type { ActingFor } from '../upstream/peer/adapter.js';

export class CallerAccess {
  constructor(
    private readonly rules: readonly AccessRule[] | undefined,
    private readonly caller: Caller | undefined,
    private readonly events: GatewayEvents,
  ) {}

  /** Whether a listed item is the caller's to see. */
  readonly visible = (kind: ListKind, item: JsonObject): boolean => {
    const name = kind === 'resources' ? item.uri : kind === 'resourceTemplates' ? item.uriTemplate : item.name;
    return typeof name !== 'string' || mayUse(this.rules, this.caller, kind === 'resourceTemplates' ? 'resources' : kind, name);
  };

  /**
   * The caller as a reader of tasks: tasks of `principal` (undefined without authentication: ids are bearers) whose
   * tool it may still use. Rules are checked at every read, not only when the task was made.
   */
  taskReader(principal: string | undefined): TaskReader {
    return { principal, mayUse: (tool) => mayUse(this.rules, this.caller, 'tools', tool) };
  }

  /** Whom the gateway acts for at upstreams on this request: the authenticated caller (none without authentication). */
  get actingFor(): ActingFor | undefined {
    return this.caller;
  }

  /** The authenticated caller (none without authentication): who an approver is. */
  get who(): Caller | undefined {
    return this.caller;
  }

  /** Whether the caller may use `name`; a denial is announced for the audit trail. */
  allows(kind: AccessKind, name: string): boolean {
    if (mayUse(this.rules, this.caller, kind, name)) return true;
    this.events.emit('access.denied', { principal: this.caller?.principal, kind, name });
    return false;
  }
}
