// The type of what load.ts hands out, applied to what the schema parses (types.ts, identity.ts).

/** What the loader hands out is deep-frozen: every list (at any depth) is read-only. */
export type Loaded<T> = T extends readonly (infer E)[] ? readonly Loaded<E>[] : T extends object ? { [K in keyof T]: Loaded<T[K]> } : T;
