// The value schemas that several sections of the config schema share: integers written as digit strings, text
// YAML may have read as a number, http(s) URLs, name prefixes and tool names. Each is defined once so a value means
// the same wherever the file writes it.
import { z } from 'zod';

/** Digit strings an integer may be written as (what `${VAR}` interpolation yields). */
export const DIGITS = /^\s*-?\d+\s*$/;

/**
 * The values whose file form is wider than their parsed type, and how: `digits`, an integer that may also be a digit
 * string; `scalar`, text that YAML may have read as a number or boolean. The JSON Schema of the file
 * (scripts/config-json-schema.ts) reads this, since a preprocess step says nothing of what it accepts.
 */
export const fileForm = z.registry<{ form: 'digits' | 'scalar' }>();

/**
 * A non-negative (or >= min) integer. Digit strings are accepted too, because `${VAR}` interpolation always yields
 * a string: `port: ${PORT:-8080}` must work.
 */
export function int(min: number, max: number = Number.MAX_SAFE_INTEGER) {
  const schema = z.preprocess((v) => (typeof v === 'string' && DIGITS.test(v) ? Number(v) : v), z.number().int().min(min).max(max));
  fileForm.add(schema, { form: 'digits' });
  return schema;
}

/** Env values, args and header values: YAML turns `3001` or `true` into non-strings; an operator means the text. */
export const text = z.preprocess((v) => (typeof v === 'number' || typeof v === 'boolean' ? String(v) : v), z.string());
fileForm.add(text, { form: 'scalar' });

export function isUrlWithProtocol(value: string, protocols: readonly string[]): boolean {
  try {
    const url = new URL(value);
    return protocols.includes(url.protocol) && url.host !== '';
  } catch {
    return false;
  }
}

export const httpUrl = z.string().refine((v) => isUrlWithProtocol(v, ['http:', 'https:']), { error: 'expected an http(s) URL' });

// Characters MCP allows in tool names; a prefix becomes part of every exposed tool name.
const PREFIX = /^[A-Za-z0-9_.\-/]*$/;
export const prefix = z.string().regex(PREFIX, { error: 'a prefix may contain only letters, digits, "_", "-", "." and "/"' });

// MCP tool names: 1-128 of these characters.
const TOOL_NAME = /^[A-Za-z0-9_.\-/]{1,128}$/;
export const toolName = z.string().regex(TOOL_NAME, { error: 'a tool name is 1-128 letters, digits, "_", "-", "." or "/"' });
