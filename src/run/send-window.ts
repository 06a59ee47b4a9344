/**
 * How far a worker thread's episodes may run ahead of the run's thread, which writes what they
 * commit: a thread's batches of events count until the run's thread says it has written them and
 * its folder has caught up, and past `limit` unanswered batches the thread's episodes wait at their
 * next step (as a run in one thread waits for its folder). Without it, a slow disk would let a
 * thread queue up to concurrency × max-steps events in the run's thread.
 */

/** A thread's window: batches it may have sent and not yet seen written. */
export const WINDOW = 4;
/** Items in a batch at most (a batch is otherwise one turn of the thread's loop): ~170 steps' events. */
export const BATCH_ITEMS = 1_024;

export class SendWindow {
  #open = 0;
  #waiters: (() => void)[] = [];

  constructor(readonly limit: number) {}

  /** Batches sent and not yet answered. */
  get open(): number {
    return this.#open;
  }

  /** The breather's test: the window is full. */
  get needsDrain(): boolean {
    return this.#open >= this.limit;
  }

  sent(): void {
    this.#open++;
  }

  /** The run's thread has written a batch. */
  answered(): void {
    this.#open = Math.max(0, this.#open - 1);
    if (this.#open < this.limit) for (const wake of this.#waiters.splice(0)) wake();
  }

  /** Resolves once the window has room. */
  drained(): Promise<void> {
    if (!this.needsDrain) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}
