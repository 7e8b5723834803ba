// Bytes of request bodies the gateway holds, per principal and in total (`listen.maxInflightBytesPerPrincipal`,
// `listen.maxInflightBytes`). A request is charged its body's size before the body is read, and the charge stays
// while anything still holds what the body carried: the request's handling (a forwarded call until its answer),
// a task's run (until its upstream call ends), a call parked for an MRTR retry. Each holder takes a hold and
// gives it back once; the bytes go back with the last hold. What the gateway makes of a body (the text, the
// parsed message, the stored call, the upstream request) is a small multiple of its size, so bounding the bodies
// bounds that heap too.
import { GatewayError } from '../errors.js';

/**
 * Requests of at most this many bytes (polls, pings, task reads and cancels, ordinary calls) may use the whole
 * budget; larger ones only all but its last eighth. So a principal whose big calls filled its budget can still
 * read, wait on and cancel its tasks, and the gateway keeps serving small requests when big ones filled it.
 */
export const SMALL_REQUEST_BYTES = 64 * 1024;
const RESERVE_SHARE = 1 / 8;
/** What frees a budget (answers, task ends, cancellations) cannot be foreseen: refused clients try again after this. */
export const INFLIGHT_RETRY_AFTER_MS = 5_000;

/** A request's bytes, held by whatever still holds what it carried. */
export interface InflightCharge {
  /** Keeps the bytes charged until the returned function is called (once: later calls do nothing). */
  hold(): () => void;
}

/** Past a budget: the error says which one, and when to try again. */
export class InflightBudgetFull extends GatewayError {
  constructor(message: string, data: { budget: string; limitBytes: number; inflightBytes: number; requestBytes: number }) {
    super('inflight_budget_full', message, { ...data, retryAfterMs: INFLIGHT_RETRY_AFTER_MS });
  }
}

export interface InflightLimits {
  /** Over all principals; 0 = unlimited. */
  total: number;
  /** Per principal; 0 = unlimited. */
  perPrincipal: number;
}

export class InflightBytes {
  private total = 0;
  private readonly byPrincipal = new Map<string, number>();

  constructor(private readonly limits: InflightLimits) {}

  /**
   * Charges `bytes` to `principal`, or throws InflightBudgetFull when a budget cannot take them. The caller owns
   * the first hold (`release`); more holders take their own from `charge`.
   */
  admit(principal: string, bytes: number): { charge: Charge; release: () => void } {
    this.check(principal, bytes);
    return this.force(principal, bytes);
  }

  /** Charges bytes the gateway holds already, whatever the budgets say (a lost task's call run again here). */
  force(principal: string, bytes: number): { charge: Charge; release: () => void } {
    this.add(principal, bytes);
    const charge = new Charge((delta) => this.add(principal, delta), bytes);
    return { charge, release: charge.hold() };
  }

  /** Bytes charged now, to one principal or in all. */
  inflight(principal?: string): number {
    return principal === undefined ? this.total : (this.byPrincipal.get(principal) ?? 0);
  }

  private check(principal: string, bytes: number): void {
    // Small requests may use the reserve; larger ones must leave it free.
    const room = (limit: number): number => (bytes <= SMALL_REQUEST_BYTES ? limit : limit - Math.floor(limit * RESERVE_SHARE));
    const held = this.byPrincipal.get(principal) ?? 0;
    const { total, perPrincipal } = this.limits;
    if (perPrincipal > 0 && held + bytes > room(perPrincipal)) {
      throw new InflightBudgetFull(
        `Too many request bytes in flight for '${principal}': its calls that have not ended hold ${held} of ${perPrincipal} (listen.maxInflightBytesPerPrincipal), and this request carries ${bytes}; retry in ${INFLIGHT_RETRY_AFTER_MS / 1000} s, or cancel a call`,
        { budget: 'listen.maxInflightBytesPerPrincipal', limitBytes: perPrincipal, inflightBytes: held, requestBytes: bytes },
      );
    }
    if (total > 0 && this.total + bytes > room(total)) {
      throw new InflightBudgetFull(
        `Too many request bytes in flight in the gateway: calls that have not ended hold ${this.total} of ${total} (listen.maxInflightBytes), and this request carries ${bytes}; retry in ${INFLIGHT_RETRY_AFTER_MS / 1000} s`,
        { budget: 'listen.maxInflightBytes', limitBytes: total, inflightBytes: this.total, requestBytes: bytes },
      );
    }
  }

  private add(principal: string, delta: number): void {
    this.total += delta;
    const held = (this.byPrincipal.get(principal) ?? 0) + delta;
    if (held > 0) this.byPrincipal.set(principal, held);
    else this.byPrincipal.delete(principal);
  }
}

/** One request's bytes: given back once, when the last hold is released. */
export class Charge implements InflightCharge {
  private holds = 0;
  private returned = false;

  constructor(
    private readonly adjust: (delta: number) => void,
    private bytes: number,
  ) {}

  hold(): () => void {
    // Nothing is charged any more: a late holder has nothing to keep.
    if (this.returned) return () => undefined;
    this.holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.holds > 0) return;
      this.returned = true;
      this.adjust(-this.bytes);
    };
  }

  /** Lowers the charge to what the body turned out to be (charged at most, before a body of unknown length was read). */
  shrinkTo(bytes: number): void {
    if (this.returned || bytes >= this.bytes) return;
    this.adjust(bytes - this.bytes);
    this.bytes = bytes;
  }
}
