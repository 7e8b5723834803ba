// What the config schema says about each key besides its type: the schema is the one place a key is written, so its
// description (zod's `.describe()`) and, where the loader fills it in (build.ts), its derived default sit on the key
// itself. scripts/config-doc.ts reads them into docs/configuration.md, and the JSON Schema of the file carries the
// descriptions to editors. Text is Markdown; line breaks inside a string are reflowed. Say what the key does, its
// units and special values, and what happens at the limit.
import type { z } from 'zod';

declare module 'zod' {
  interface GlobalMeta {
    /**
     * The default of a key the schema leaves optional because build.ts fills it in or derives it when the config is
     * built (`<name>__`, the upstream's URL): Markdown, shown in the reference in place of a schema default.
     */
    derivedDefault?: string;
  }
}

/** The same keys, each with `meta(key)` laid over its metadata (a rule restating the defaults' keys, say). */
export function restate<S extends Record<string, z.ZodType>>(shape: S, meta: (key: keyof S & string) => z.GlobalMeta): S {
  return Object.fromEntries(Object.entries(shape).map(([key, schema]) => [key, schema.meta(meta(key))])) as S;
}

/** A default value as the reference writes it inline: `{ onLoss: false, maxAttempts: 1 }`. */
export function inlineValue(value: unknown): string {
  if (value !== null && typeof value === 'object') {
    return `{ ${Object.entries(value).map(([k, v]) => `${k}: ${inlineValue(v)}`).join(', ')} }`;
  }
  return String(value);
}
