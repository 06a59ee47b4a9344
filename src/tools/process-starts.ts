/**
 * Starting processes without taking the run down with them. Node's `spawn` forks synchronously:
 * ten thousand calls of a subprocess tool dispatched at once used to fork back to back, holding
 * the event loop for a minute, so Ctrl-C was not even seen, and the processes outlived the run.
 *
 * - `processStarts`: a process-start queue. At most `limit` starts are in flight (from `spawn`
 *   until the child reports it has started); the rest wait in order, yielding the event loop
 *   between batches, and a call cancelled while it waits never starts a process at all. When the
 *   machine runs out of file descriptors or processes, no more run at once than ran then: the
 *   other calls wait for a process to end instead of failing.
 * - `trackGroup`: every process group a tool call leads is killed when this process exits, however
 *   it exits (a second Ctrl-C, an uncaught error), so no tool outlives the run.
 *
 * The limit is `AGENT_MAX_PROCESS_STARTS`, by default 4 × the cores.
 */
import os from 'node:os';

function defaultLimit(): number {
  const given = Number(process.env['AGENT_MAX_PROCESS_STARTS']);
  return Number.isInteger(given) && given > 0 ? given : 4 * os.availableParallelism();
}

interface Waiter {
  readonly grant: () => void;
  cancelled: boolean;
}

/** A granted start: `started` once the child reports it runs, `done` once the call is over (idempotent). */
export interface StartSlot {
  started(): void;
  done(): void;
}

export class StartQueue {
  readonly limit: number;
  #starting = 0;
  #running = 0;
  /**
   * How many may run at once: unbounded until a start fails for want of file descriptors or
   * processes (EMFILE, ENFILE, EAGAIN), then what was running at that moment.
   */
  #runningCap = Number.POSITIVE_INFINITY;
  /** Waiters in order; `#head` is the next one (a moving index: 10,000 waiters must not cost O(n) each). */
  #waiting: Waiter[] = [];
  #head = 0;

  constructor(limit = defaultLimit()) {
    this.limit = limit;
  }

  /** Starts in flight, processes running, and calls waiting now. */
  get size(): { readonly starting: number; readonly running: number; readonly waiting: number } {
    return { starting: this.#starting, running: this.#running, waiting: this.#waiting.length - this.#head };
  }

  get #free(): boolean {
    return this.#starting < this.limit && this.#starting + this.#running < this.#runningCap;
  }

  /**
   * Resolves with a slot once this call may start its process. Rejects with the signal's reason,
   * without ever taking a slot, if `signal` aborts first.
   */
  acquire(signal: AbortSignal): Promise<StartSlot> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    if (this.#free && this.#head === this.#waiting.length) {
      this.#starting++;
      return Promise.resolve(this.#slot());
    }
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        waiter.cancelled = true;
        reject(signal.reason as Error);
      };
      const waiter: Waiter = {
        cancelled: false,
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve(this.#slot());
        },
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  /** A start failed for want of resources: no more may run at once than run now (at least one). */
  exhausted(): void {
    this.#runningCap = Math.max(1, this.#running);
  }

  #slot(): StartSlot {
    let phase: 'starting' | 'running' | 'done' = 'starting';
    return {
      started: () => {
        if (phase !== 'starting') return;
        phase = 'running';
        this.#starting--;
        this.#running++;
        this.#schedule();
      },
      done: () => {
        if (phase === 'done') return;
        if (phase === 'starting') this.#starting--;
        else this.#running--;
        phase = 'done';
        this.#schedule();
      },
    };
  }

  #scheduled = false;

  /** The next starts wait for a turn of the event loop: signals, timers and I/O run between batches. */
  #schedule(): void {
    if (this.#scheduled || this.#head === this.#waiting.length) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#next();
    });
  }

  #next(): void {
    while (this.#free && this.#head < this.#waiting.length) {
      const w = this.#waiting[this.#head++] as Waiter;
      if (w.cancelled) continue;
      this.#starting++;
      w.grant();
    }
    if (this.#head === this.#waiting.length) {
      this.#waiting = [];
      this.#head = 0;
    }
  }
}

/** The process's one start queue, shared by every subprocess tool and pool. */
export const processStarts = new StartQueue();

const groups = new Set<number>();

/**
 * Kill every process group a tool call of this process leads. Runs on 'exit' by itself; a process
 * about to die by a signal (a second Ctrl-C re-raised) calls it first, since 'exit' never comes then.
 */
export const killProcessGroups = (): void => {
  for (const pid of groups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
};

/** Kill the group led by `pid` when this process exits; the returned function forgets it (once the call is over). */
export function trackGroup(pid: number | undefined): () => void {
  if (pid === undefined) return () => undefined;
  if (groups.size === 0) process.on('exit', killProcessGroups);
  groups.add(pid);
  return () => {
    if (!groups.delete(pid)) return;
    if (groups.size === 0) process.off('exit', killProcessGroups);
  };
}

/** How many process groups are alive now (for tests and the summary). */
export function liveGroups(): number {
  return groups.size;
}
