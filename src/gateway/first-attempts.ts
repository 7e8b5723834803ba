// The gateway listens before its upstreams have connected (a slow one must not keep the others' clients out), so a
// client that connects in the first moments would see empty lists, and a host that lists once at connect (most do)
// would keep an empty toolbox after every restart. Until each upstream of the starting configuration has made its
// first attempt (connected, or found not reachable yet), what depends on the merged catalog waits for it: lists,
// a session's declared capabilities, a lookup of a name no upstream lists yet. Each upstream is waited for at most
// its initializeTimeoutMs from the start; one still connecting after that is left out and joins later with a
// list_changed, as any upstream coming back does.

export interface FirstAttempt {
  /** Settles when the upstream's first attempt ended (it joined the lists, or was found down or refused). */
  attempt: Promise<unknown>;
  /** Waited for no longer than this, from the start: the upstream's initializeTimeoutMs. */
  boundMs: number;
}

export class FirstAttempts {
  private releaseBegun!: () => void;
  /** Settles once the start has named its upstreams' attempts (the listener opens just before). */
  private readonly begun = new Promise<void>((resolve) => (this.releaseBegun = resolve));
  private settled: Promise<void> | undefined;
  private done = false;

  /** The start's upstreams, each bounded by its own timeout; called once (an empty list: nothing to wait for). */
  begin(attempts: readonly FirstAttempt[]): void {
    if (this.settled !== undefined) return;
    this.settled = Promise.all(attempts.map(({ attempt, boundMs }) => bounded(attempt, boundMs))).then(() => {
      this.done = true;
    });
    this.releaseBegun();
  }

  /** Whether every first attempt has ended (or its bound passed): nothing waits any more. */
  get over(): boolean {
    return this.done;
  }

  /** Resolves when every first attempt has ended, or its bound passed. */
  async wait(): Promise<void> {
    if (this.done) return;
    await this.begun;
    await this.settled;
  }
}

/** Nothing to wait for: catalogs built outside a gateway's start (collision checks, tests). */
export const NO_FIRST_ATTEMPTS: FirstAttempts = (() => {
  const none = new FirstAttempts();
  none.begin([]);
  return none;
})();

function bounded(attempt: Promise<unknown>, boundMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const expiry = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, boundMs);
    timer.unref();
  });
  return Promise.race([attempt.then(() => undefined, () => undefined), expiry]).finally(() => clearTimeout(timer));
}
