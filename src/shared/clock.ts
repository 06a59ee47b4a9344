/**
 * Time is injected so that tests and replays are deterministic. `now()` is the event time in
 * epoch milliseconds (what logs and `stateAt(time)` use); `monotonic()` measures durations.
 */
export interface Clock {
  now(): number;
  monotonic(): number;
}

/** The clock of the machine: `Date.now()` and `performance.now()`. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
};

/** A clock that only moves when told to. Both readings advance together. */
export class ManualClock implements Clock {
  #t: number;
  readonly #start: number;

  constructor(start = 1_700_000_000_000) {
    this.#t = start;
    this.#start = start;
  }

  now(): number {
    return this.#t;
  }

  monotonic(): number {
    return this.#t - this.#start;
  }

  advance(ms: number): void {
    this.#t += ms;
  }
}
