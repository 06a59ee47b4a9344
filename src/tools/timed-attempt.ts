/**
 * One attempt of a call under a deadline, as one object: its entry in the deadline queue, the
 * owner of its (lazily created) AbortSignal, and the two callbacks its handler's promise settles
 * into. The first of "the handler settled" and "the deadline passed" wins; a result after the
 * deadline is dropped. The timeout is aggressive: a handler that ignores its signal still times out.
 *
 * Why one object and no `new Promise` per attempt: at thousands of calls in flight, every object
 * an attempt keeps alive is copied by each young-generation collection while the call waits
 * (bench/cold-start.bench.ts measured GC at 46 % of a 4,096-agent run before this).
 */
import type { Deadline, DeadlineQueue } from '../shared/deadlines.js';

/**
 * Where the controllers of attempts in flight are kept, so that cancelling the call aborts them.
 * A plain Set, not a listener on the call's signal: hanging a listener per attempt off a
 * long-lived signal costs more in garbage collection than the rest of the attempt (bench/).
 */
export type LiveControllers = Set<AbortController>;

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

export abstract class TimedAttempt implements Deadline {
  at = 0;
  queued = false;
  readonly #parent: AbortSignal;
  readonly #live: LiveControllers | undefined;
  readonly #deadlines: DeadlineQueue | undefined;
  readonly #onTimeout: () => Error;
  #controller: AbortController | undefined;
  #expired: Error | undefined;
  #over = false;

  /** `parent`: the call's signal (whoever aborts it also aborts the controllers in `live`). */
  constructor(parent: AbortSignal, live: LiveControllers | undefined, deadlines: DeadlineQueue | undefined, onTimeout: () => Error) {
    this.#parent = parent;
    this.#live = live;
    this.#deadlines = deadlines;
    this.#onTimeout = onTimeout;
  }

  /** The attempt's signal: aborts on timeout or when the call is cancelled. Created on first read. */
  protected attemptSignal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#expired) this.#controller.abort(this.#expired);
      else if (this.#parent.aborted) this.#controller.abort(this.#parent.reason);
      else this.#live?.add(this.#controller);
    }
    return this.#controller.signal;
  }

  /**
   * Runs the handler (`invoke`) and follows what it returns. A synchronous result or throw is
   * delivered in a microtask, as a promise's would be, so no caller sees its outcome before
   * `start` has returned.
   */
  protected start(): void {
    this.#deadlines?.add(this);
    let value: unknown;
    try {
      value = this.invoke();
    } catch (err) {
      queueMicrotask(() => this.#end(false, err));
      return;
    }
    if (isThenable(value)) {
      value.then(
        (v) => this.#end(true, v),
        (err: unknown) => this.#end(false, err),
      );
    } else queueMicrotask(() => this.#end(true, value));
  }

  /** Calls the handler: its value, a promise of it, or a throw. */
  protected abstract invoke(): unknown;

  /** The handler settled, in time or not. */
  protected handlerSettled(): void {}

  /** The attempt's outcome, called exactly once: the handler's, or the timeout error. */
  protected abstract settle(ok: boolean, value: unknown): void;

  expire(): void {
    this.#expired = this.#onTimeout();
    this.#controller?.abort(this.#expired);
    this.#finish(false, this.#expired);
  }

  #end(ok: boolean, value: unknown): void {
    this.handlerSettled();
    if (this.#over) return;
    this.#deadlines?.cancel(this);
    this.#finish(ok, value);
  }

  #finish(ok: boolean, value: unknown): void {
    this.#over = true;
    if (this.#controller) this.#live?.delete(this.#controller);
    this.settle(ok, value);
  }
}
