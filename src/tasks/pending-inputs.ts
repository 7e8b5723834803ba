// Questions an upstream asks a client (elicitation, sampling, roots) while a call or task waits on the answer,
// keyed the way both task eras and MRTR name them. One map for all of them: a task's input requests and a
// synchronous 2026-07-28 call's MRTR rounds.
import { withoutMeta, type JsonObject, type Outcome } from '../jsonrpc.js';
import { RequestCancelled } from '../errors.js';

export interface InputRequest {
  method: string;
  params?: JsonObject;
}

/** The key of the `n`th input request of a call or task: its kind (elicitation, sampling, roots) and a counter. */
export function inputKey(method: string, n: number): string {
  return `${method.split('/')[0] || 'input'}-${n}`;
}

/** An input request as the client sees it: method and params, without transport-level `_meta` the upstream added. */
export function clientInputRequest(request: InputRequest): InputRequest {
  return request.params === undefined ? { method: request.method } : { method: request.method, params: withoutMeta(request.params) };
}

export interface Pending {
  request: InputRequest;
  settle(outcome: Outcome): void;
}

export class PendingInputs {
  private readonly pending = new Map<string, Pending>();
  private nextKey = 1;

  constructor(
    /** Called whenever what is outstanding changed (added, answered, aborted). */
    private readonly changed: () => void = () => undefined,
  ) {}

  get size(): number {
    return this.pending.size;
  }

  /** Outstanding requests by key, as the client sees them. */
  outstanding(): JsonObject {
    const requests: JsonObject = {};
    for (const [key, input] of this.pending) requests[key] = input.request;
    return requests;
  }

  /** Adds a question under a fresh key; resolves with its answer, or as cancelled when `signal` aborts first. */
  ask(request: InputRequest, signal: AbortSignal): { key: string; answer: Promise<Outcome> } {
    const key = inputKey(request.method, this.nextKey++);
    const answer = new Promise<Outcome>((resolve) => {
      const onAbort = (): void => {
        if (this.pending.delete(key)) this.changed();
        resolve({ error: { code: RequestCancelled, message: 'Request cancelled' } });
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.pending.set(key, {
        request: clientInputRequest(request),
        settle: (outcome) => {
          signal.removeEventListener('abort', onAbort);
          resolve(outcome);
        },
      });
    });
    this.changed();
    return { key, answer };
  }

  /** Whether a question still waits under `key`. */
  isOpen(key: string): boolean {
    return this.pending.has(key);
  }

  /** Answers one question; false when nothing waits under that key. */
  settle(key: string, outcome: Outcome): boolean {
    const input = this.pending.get(key);
    if (input === undefined) return false;
    this.pending.delete(key);
    input.settle(outcome);
    this.changed();
    return true;
  }

  /** Answers every question that `responses` names with a response object; returns how many. */
  answer(responses: JsonObject): number {
    let answered = 0;
    for (const [key, response] of Object.entries(responses)) {
      if (typeof response !== 'object' || response === null || Array.isArray(response) || !this.pending.has(key)) continue;
      this.settle(key, { result: response as JsonObject });
      answered++;
    }
    return answered;
  }

  /** Removes every outstanding question and hands it over (to be asked elsewhere and settled from there). */
  takeAll(): Pending[] {
    const all = [...this.pending.values()];
    this.pending.clear();
    if (all.length > 0) this.changed();
    return all;
  }

  /** Answers every outstanding question with `outcome` (the call or task ended). */
  settleAll(outcome: Outcome): void {
    for (const key of [...this.pending.keys()]) this.settle(key, outcome);
  }
}
