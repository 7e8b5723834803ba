// Label values for metrics, bounded: every distinct value is a time series in Prometheus, so names that come from
// clients (methods, tools, principals) are checked against what the gateway knows and capped, and whatever falls
// outside is counted as "other". Also a cache of label children, so the hot paths (one observation per request)
// look a child up without building a key string or an object per call.

/** What a value outside the known set, or past the cap, is labelled. */
export const OTHER = 'other';

/** At most this many distinct values per label: a defence, far above what a sane configuration produces. */
export const MAX_LABEL_VALUES = 500;

/**
 * The label value for `value`: itself when `known` accepts it and the cap leaves room, else "other". Accepted
 * values are remembered (a value once counted stays a series of its own); refused ones are asked again next time
 * (a tool an upstream lists later gets its own series from then on).
 */
export class BoundedLabel {
  private readonly accepted = new Set<string>();

  constructor(
    private readonly known: (value: string) => boolean,
    private readonly cap = MAX_LABEL_VALUES,
  ) {}

  of(value: string | undefined): string {
    if (value === undefined || value === '') return '';
    if (this.accepted.has(value)) return value;
    if (this.accepted.size >= this.cap || !this.known(value)) return OTHER;
    this.accepted.add(value);
    return value;
  }
}

/**
 * Children of one metric by up to four label values, in nested maps (one level per label): a lookup allocates
 * nothing once the child exists. `make` builds the child for values seen the first time (unused ones are '').
 */
export class ChildCache<C> {
  private readonly root = new Map<string, Map<string, Map<string, Map<string, C>>>>();

  constructor(private readonly make: (a: string, b: string, c: string, d: string) => C) {}

  get(a: string, b = '', c = '', d = ''): C {
    let l1 = this.root.get(a);
    if (l1 === undefined) this.root.set(a, (l1 = new Map()));
    let l2 = l1.get(b);
    if (l2 === undefined) l1.set(b, (l2 = new Map()));
    let l3 = l2.get(c);
    if (l3 === undefined) l2.set(c, (l3 = new Map()));
    let child = l3.get(d);
    if (child === undefined) l3.set(d, (child = this.make(a, b, c, d)));
    return child;
  }
}
