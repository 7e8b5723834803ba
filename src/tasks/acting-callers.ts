// Whom a task's upstream call acts for when another replica runs it (a re-run after loss, or a start after waiting
// in line). The replica that creates a task acts for its caller from the request in hand. A stored call keeps that
// caller sealed (AES-256-GCM, identity.sealingKeys, bound to the task id): the principal, its verified claims and,
// for a token exchange, its access token, so that the other replica can obtain the caller's upstream credential
// anew. Nothing of it is stored in the clear; without a sealing key nothing is stored, and a re-run for an upstream
// that needs the caller's identity fails saying so instead of running as the gateway.
import { UnsealError, type Sealer } from '../identity/sealing.js';
import type { StoredCall, TaskRecord } from '../store/task-store.js';
import type { ActingFor } from '../upstream/peer/adapter.js';

/** The sealed form's fields: short, since every kept call carries it. */
interface SealedCaller {
  p: string;
  c: Readonly<Record<string, unknown>>;
  t?: string;
}

export class ActingCallers {
  constructor(private readonly sealer: Sealer | undefined) {}

  /** `call` with its caller sealed into it, where there is a caller and a key to seal with. */
  keep(taskId: string, call: StoredCall, actingFor: ActingFor | undefined): StoredCall {
    if (actingFor === undefined || this.sealer === undefined) return call;
    const sealed: SealedCaller = { p: actingFor.principal, c: actingFor.claims };
    const token = actingFor.subjectToken?.();
    if (token !== undefined) sealed.t = token;
    return { ...call, caller: this.sealer.seal(JSON.stringify(sealed), taskId) };
  }

  /**
   * Whom a run of `task`'s kept call acts for on this replica. Throws (failing the run, whose task then says why)
   * when the upstream needs the caller's identity and it cannot be restored.
   */
  restore(task: TaskRecord & { call: StoredCall }, needsCaller: boolean): ActingFor | undefined {
    const sealed = task.call.caller;
    if (sealed === undefined) {
      if (!needsCaller) return undefined;
      throw new Error('Cannot run the call again as its caller on this replica: the task kept no sealed identity (configure identity.sealingKeys so that tasks can run as their caller on any replica)');
    }
    if (this.sealer === undefined) throw new Error('Cannot run the call again as its caller: identity.sealingKeys is not configured on this replica');
    let opened: SealedCaller;
    try {
      opened = JSON.parse(this.sealer.open(sealed, task.taskId)) as SealedCaller;
    } catch (error) {
      const why = error instanceof UnsealError ? error.message : 'it cannot be read';
      throw new Error(`Cannot run the call again as its caller: the sealed identity cannot be opened (${why})`, { cause: error });
    }
    if (opened.p !== task.principal) throw new Error('Cannot run the call again as its caller: the sealed identity names another principal');
    const token = opened.t;
    return { principal: opened.p, claims: opened.c, ...(token === undefined ? {} : { subjectToken: () => token }) };
  }
}
