import type { SpanContext } from '@opentelemetry/api';

/** Most task creations remembered until their run starts (oldest forgotten first): a run elsewhere never takes its own. */
const MAX_REMEMBERED = 10_000;

/**
 * The span of the request that created each task, until the task's run starts here (its span links to it) or
 * the task ends. Bounded: a task run by another replica leaves its entry to be pushed out by newer ones.
 */
export class TracingLinks {
  private readonly created = new Map<string, SpanContext>();

  constructor(private readonly max = MAX_REMEMBERED) {}

  remember(taskId: string, span: SpanContext): void {
    if (this.created.size >= this.max) {
      const [oldest] = this.created.keys();
      if (oldest !== undefined) this.created.delete(oldest);
    }
    this.created.set(taskId, span);
  }

  /** The creating request's span, handed out once. */
  take(taskId: string): SpanContext | undefined {
    const span = this.created.get(taskId);
    this.created.delete(taskId);
    return span;
  }

  forget(taskId: string): void {
    this.created.delete(taskId);
  }

  get size(): number {
    return this.created.size;
  }
}
