// Every key of the config schema, found by walking the zod schema itself (never a hand list), with what a reader of
// the reference needs: its dotted path, type, default and which variant of a union it belongs to. The generator of
// docs/configuration.md and its test both read this, so the doc cannot list a key the schema lacks or miss one.
import { z } from 'zod';
import { RawConfigSchema } from '../src/config/schema.js';

type Schema = z.core.$ZodType;

export interface ConfigKey {
  /** Dotted path as the reference writes it: `upstreams.<name>.tools.overrides.<tool>.name`, `tasks.rules[].match`. */
  path: string;
  type: string;
  /** The default the schema applies, as YAML-ish text; undefined when the key has none. */
  default: string | undefined;
  /** A map the schema fills in when it is left out (`.prefault({})`): each of its keys takes its own default. */
  defaultsPerKey: boolean;
  /** True when leaving the key out (where its map is written) is an error. */
  required: boolean;
  /** The union variants the key exists in (`type: redis`), when it does not exist in all of them. */
  variants: string[] | undefined;
  /** For a key that is a union of maps: the key that tells them apart, and each variant's value and keys. */
  union: { discriminator: string; variants: { value: string; keys: string[] }[] } | undefined;
  /** What the key means (its schema's `.describe()`), Markdown. */
  description: string | undefined;
  /** The default build.ts fills in where the schema has none (metadata `derivedDefault`), Markdown. */
  derivedDefault: string | undefined;
}

// What a map's key stands for in a path, where the map is keyed by the operator's own names.
const PLACEHOLDERS: Record<string, string> = {
  upstreams: '<name>',
  'upstreams.<name>.tools.overrides': '<tool>',
};

const defOf = (schema: Schema): z.core.$ZodTypeDef => schema._zod.def;

interface Unwrapped {
  core: Schema;
  default: unknown;
  hasDefault: boolean;
  /** `.prefault(v)`: v goes through the schema, so the default is whatever the inner keys default to. */
  prefault: boolean;
  optional: boolean;
  /** The metadata of the outermost layer that has any (a key's own `.describe()` wins over its type's). */
  meta: z.GlobalMeta;
}

/** Peels optional, default, prefault and pipes (preprocess and transform) off a schema. */
function unwrap(schema: Schema): Unwrapped {
  const out: Unwrapped = { core: schema, default: undefined, hasDefault: false, prefault: false, optional: false, meta: {} };
  for (;;) {
    out.meta = { ...z.globalRegistry.get(out.core), ...out.meta };
    const def = defOf(out.core);
    if (def.type === 'optional') {
      out.optional = true;
      out.core = (def as z.core.$ZodOptionalDef).innerType;
    } else if (def.type === 'default' || def.type === 'prefault') {
      const d = def as z.core.$ZodDefaultDef;
      if (!out.hasDefault) {
        out.default = d.defaultValue;
        out.hasDefault = true;
        out.prefault = def.type === 'prefault';
      }
      out.core = d.innerType;
    } else if (def.type === 'pipe') {
      const p = def as z.core.$ZodPipeDef;
      // preprocess(fn, schema) is transform -> schema; schema.transform(fn) is schema -> transform.
      out.core = defOf(p.in).type === 'transform' ? p.out : p.in;
    } else {
      return out;
    }
  }
}

function checksOf(schema: Schema): Record<string, unknown>[] {
  return (defOf(schema).checks ?? []).map((c) => c._zod.def as unknown as Record<string, unknown>);
}

function numberRange(schema: Schema): string {
  let min: number | undefined;
  let max: number | undefined;
  for (const c of checksOf(schema)) {
    if (c.check === 'greater_than' && typeof c.value === 'number') min = c.value + (c.inclusive === true ? 0 : 1);
    if (c.check === 'less_than' && typeof c.value === 'number') max = c.value - (c.inclusive === true ? 0 : 1);
  }
  if (max !== undefined && max >= Number.MAX_SAFE_INTEGER) max = undefined;
  if (min !== undefined && max !== undefined) return `integer, ${min}..${max}`;
  if (min !== undefined) return `integer, >= ${min}`;
  return 'integer';
}

function minLength(schema: Schema): number {
  const c = checksOf(schema).find((check) => check.check === 'min_length');
  return typeof c?.minimum === 'number' ? c.minimum : 0;
}

const code = (value: unknown): string => `\`${typeof value === 'string' ? value : JSON.stringify(value)}\``;

/** A human name for a schema's type: `integer, 0..65535`, one of the enum's values, `list of strings`. */
export function typeName(schema: Schema): string {
  const core = unwrap(schema).core;
  const def = defOf(core);
  switch (def.type) {
    case 'string': {
      const min = minLength(core);
      return min > 1 ? `string of at least ${min} characters` : min === 1 ? 'non-empty string' : 'string';
    }
    case 'number':
      return numberRange(core);
    case 'boolean':
      return 'boolean';
    case 'unknown':
    case 'any':
      return 'any';
    case 'literal':
      return (def as z.core.$ZodLiteralDef<z.core.util.Literal>).values.map(code).join(' | ');
    case 'enum':
      return Object.values((def as z.core.$ZodEnumDef).entries).map(code).join(' | ');
    case 'union': {
      const u = def as z.core.$ZodUnionDef;
      if ((def as { discriminator?: string }).discriminator !== undefined) return 'map';
      return u.options.map((o) => (defOf(unwrap(o).core).type === 'boolean' ? '`true` | `false`' : typeName(o))).join(' | ');
    }
    case 'array': {
      const element = typeName((def as z.core.$ZodArrayDef).element);
      const atLeast = minLength(core) > 0 ? `, at least ${minLength(core)}` : '';
      return `list of ${plural(element)}${atLeast}`;
    }
    case 'record': {
      const r = def as z.core.$ZodRecordDef;
      return `map of ${typeName(r.keyType)} to ${typeName(r.valueType)}`;
    }
    case 'object':
      return 'map';
    default:
      return def.type;
  }
}

function plural(type: string): string {
  if (type === 'map' || type === 'string' || type === 'integer' || type === 'boolean') return `${type}s`;
  if (type === 'non-empty string') return 'non-empty strings';
  return type;
}

/** YAML-ish text of a default value. */
function defaultText(u: Unwrapped): string | undefined {
  return u.hasDefault && !isDefaultPerKey(u) ? yamlInline(u.default) : undefined;
}

function isDefaultPerKey(u: Unwrapped): boolean {
  return u.prefault && u.default !== null && typeof u.default === 'object' && Object.keys(u.default).length === 0;
}

export function yamlInline(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(yamlInline).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).map(([k, v]) => `${k}: ${yamlInline(v)}`);
    return entries.length === 0 ? '{}' : `{ ${entries.join(', ')} }`;
  }
  // Plain where YAML would read it back as the same string; quoted otherwise.
  if (typeof value === 'string') {
    return /^[\w./:-]+$/.test(value) && !/^(true|false|null|\d+)$/.test(value) ? value : JSON.stringify(value);
  }
  return String(value);
}

/** The variants of a discriminated union, named `<discriminator>: <value>`, with their object schemas. */
interface Variant {
  name: string;
  value: string;
  discriminator: string;
  shape: Record<string, Schema>;
}

function variantsOf(core: Schema): Variant[] | undefined {
  const def = defOf(core) as z.core.$ZodUnionDef & { discriminator?: string };
  if (def.type !== 'union' || def.discriminator === undefined) return undefined;
  const discriminator = def.discriminator;
  return def.options.map((option) => {
    const shape = (defOf(option) as z.core.$ZodObjectDef).shape;
    const literal = defOf(unwrap(shape[discriminator] as Schema).core) as z.core.$ZodLiteralDef<z.core.util.Literal>;
    const value = String(literal.values[0]);
    return { name: `${discriminator}: ${value}`, value, discriminator, shape };
  });
}

function childPath(parent: string, key: string): string {
  return parent === '' ? key : `${parent}.${key}`;
}

/** Every key, depth first in schema order: a map's own entry comes before its keys. */
export function configKeys(root: Schema = RawConfigSchema): ConfigKey[] {
  const keys: ConfigKey[] = [];
  const seen = new Set<string>();

  const visitKey = (path: string, schema: Schema, variants: string[] | undefined, type = typeName(schema)): void => {
    if (seen.has(path)) return; // a key shared by several variants is listed once
    seen.add(path);
    const u = unwrap(schema);
    const entry: ConfigKey = {
      path,
      type,
      default: defaultText(u),
      defaultsPerKey: isDefaultPerKey(u),
      // An entry of a map keyed by the operator's names is never required by name.
      required: !u.optional && !u.hasDefault && !path.endsWith('>'),
      variants,
      union: undefined,
      description: u.meta.description,
      derivedDefault: u.meta.derivedDefault,
    };
    keys.push(entry);
    visitValue(path, u.core, entry);
  };

  // The keys inside a value: an object's, a union's variants', a list's elements', a map's entries'.
  const visitValue = (path: string, core: Schema, entry: ConfigKey | undefined): void => {
    const def = defOf(core);
    if (def.type === 'object') {
      const shape = (def as z.core.$ZodObjectDef).shape;
      for (const [key, child] of Object.entries(shape)) visitKey(childPath(path, key), child, undefined);
      return;
    }
    const variants = variantsOf(core);
    if (variants !== undefined) {
      if (entry !== undefined) {
        const discriminator = variants[0]?.discriminator ?? '';
        const keysOf = (v: Variant) => Object.keys(v.shape).filter((k) => k !== discriminator);
        entry.union = { discriminator, variants: variants.map((v) => ({ value: v.value, keys: keysOf(v) })) };
      }
      // Keys in schema order across the variants; those not in every variant say which they belong to.
      for (const variant of variants) {
        for (const [key, child] of Object.entries(variant.shape)) {
          const owners = variants.filter((v) => key in v.shape).map((v) => v.name);
          // The discriminator itself takes any variant's value.
          const type = key === variant.discriminator ? variants.map((v) => code(v.value)).join(' | ') : undefined;
          visitKey(childPath(path, key), child, owners.length === variants.length ? undefined : owners, type);
        }
      }
      return;
    }
    if (def.type === 'array') {
      visitValue(`${path}[]`, unwrap((def as z.core.$ZodArrayDef).element).core, undefined);
      return;
    }
    if (def.type === 'record') {
      const value = unwrap((def as z.core.$ZodRecordDef).valueType).core;
      const valueType = defOf(value).type;
      if (valueType === 'object' || variantsOf(value) !== undefined) {
        visitKey(`${path}.${PLACEHOLDERS[path] ?? '<key>'}`, (def as z.core.$ZodRecordDef).valueType, undefined);
      }
    }
  };

  visitValue('', unwrap(root).core, undefined);
  return keys;
}
