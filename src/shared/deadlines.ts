/**
 * Deadlines of one fixed duration under one timer. Every call of a tool has the same timeout, so
 * its deadlines fall due in the order the calls started: a FIFO with a single timer armed for
 * its oldest live entry replaces a `setTimeout` (a Timeout object, a closure, a linked-list
 * insert and remove) per call. At 4,096 calls in flight that is thousands fewer live objects for
 * every young-generation collection to copy (bench/cold-start.bench.ts).
 *
 * Finished entries are only marked (`cancel`); they leave the queue when the head passes them, or
 * in a compaction once they outnumber the live ones. With no live entry the timer is unref'd, so
 * an idle queue never holds the event loop open, yet one call after another (a sequential agent)
 * re-arms nothing.
 */

/** An entry: `expire` runs once, when its deadline passes before it was cancelled. */
export interface Deadline {
  /** When it falls due, on the queue's clock (set by `add`). */
  at: number;
  /** Set by `add`, cleared by `cancel` or expiry. */
  queued: boolean;
  expire(): void;
}

/** Finished entries allowed to wait in the queue before it is compacted (and at least as many as the live ones). */
const COMPACT_AFTER = 1_024;

export class DeadlineQueue {
  readonly #ms: number;
  readonly #now: () => number;
  #items: Deadline[] = [];
  #head = 0;
  #live = 0;
  #timer: NodeJS.Timeout | undefined;
  /** The deadline the timer is armed for. */
  #armedAt = 0;
  /** Expire callbacks are running: the queue is re-armed and compacted after them, not by them. */
  #firing = false;

  /** `ms`: the duration of every entry; `now`: a monotonic clock in ms. */
  constructor(ms: number, now: () => number = () => performance.now()) {
    this.#ms = Math.max(0, ms);
    this.#now = now;
  }

  /** Entries added and not yet expired or cancelled. */
  get size(): number {
    return this.#live;
  }

  add(entry: Deadline): void {
    entry.at = this.#now() + this.#ms;
    entry.queued = true;
    this.#items.push(entry);
    this.#live += 1;
    if (this.#timer === undefined) {
      if (!this.#firing) this.#arm(entry.at, entry.at - this.#ms);
    } else if (this.#live === 1) this.#timer.ref();
  }

  /** The entry finished in time: it will not expire. */
  cancel(entry: Deadline): void {
    if (!entry.queued) return;
    entry.queued = false;
    this.#live -= 1;
    if (this.#firing) return;
    if (this.#live === 0) {
      // Armed for a deadline no later than any future entry's: it fires, finds nothing, and stops.
      this.#timer?.unref();
      this.#items = [];
      this.#head = 0;
      return;
    }
    const dead = this.#items.length - this.#head - this.#live;
    if (dead > COMPACT_AFTER && dead > this.#live) {
      this.#items = this.#items.slice(this.#head).filter((e) => e.queued);
      this.#head = 0;
    }
  }

  #arm(at: number, now: number): void {
    this.#armedAt = at;
    this.#timer = setTimeout(() => this.#fire(), Math.max(1, Math.ceil(at - now)));
  }

  /** Stops the timer (the queue's owner is closing); entries still queued never expire. */
  clear(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #fire(): void {
    this.#timer = undefined;
    // The timer was armed for #armedAt, so that much time has passed even on a clock that timers
    // do not drive (a test's fake timers with the real performance.now).
    const now = Math.max(this.#armedAt, this.#now());
    const items = this.#items;
    this.#firing = true;
    try {
      while (this.#head < items.length) {
        const entry = items[this.#head] as Deadline;
        if (entry.queued && entry.at > now) break;
        this.#head += 1;
        if (!entry.queued) continue;
        entry.queued = false;
        this.#live -= 1;
        entry.expire();
      }
    } finally {
      this.#firing = false;
    }
    if (this.#live === 0) {
      this.#items = [];
      this.#head = 0;
      return;
    }
    if (this.#head > COMPACT_AFTER) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    // Entries cancelled meanwhile may stand at the head: the timer is armed for the first live one.
    while (!(this.#items[this.#head] as Deadline).queued) this.#head += 1;
    this.#arm((this.#items[this.#head] as Deadline).at, now);
  }
}
