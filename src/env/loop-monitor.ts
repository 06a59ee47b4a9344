/**
 * Event-loop lag detection by timer drift: a ticking timer that fires late measures how long the
 * loop was held. It catches what the router's per-call timing cannot: blocking in a handler's
 * code after an `await`, or outside any handler.
 */
import { closeSync, openSync, readSync } from 'node:fs';

export interface LoopMonitorOptions {
  readonly thresholdMs: number;
  /** How often to tick (default 20 ms). */
  readonly intervalMs?: number;
  /** The lag the process itself caused, in ms (see `heldMs`). */
  readonly onLag: (lagMs: number) => void;
  /** Reads the thread's scheduling and the process's resource usage (default `threadUsage`); for tests. */
  readonly usage?: () => ProcessUsage;
  /**
   * Whether there was work since the last tick (a call running or started). With it, the monitor
   * starts asleep and ticks from the first `wake()` (the process's start-up, its modules loading,
   * is no handler's doing); after `idleTicks` ticks without work it sleeps again until the next:
   * an idle server (no session open) would otherwise wake 50 times a second to watch nothing.
   */
  readonly busy?: () => boolean;
  /** Quiet ticks before the monitor sleeps (default 50: a second at the default interval). */
  readonly idleTicks?: number;
}

/** A running monitor: `wake` starts it ticking again after it slept (work came). */
export interface LoopMonitor extends Disposable {
  wake(): void;
}

/** What the monitor reads at each tick: the part of `process.resourceUsage()` it needs, and the thread's run-queue time where the system tells it. */
export interface ProcessUsage {
  /** Milliseconds this thread spent runnable but waiting for a core (Linux's schedstat), when readable. */
  readonly waitingMs?: number;
  /** Microseconds. */
  readonly userCPUTime: number;
  /** Microseconds. */
  readonly systemCPUTime: number;
  readonly involuntaryContextSwitches: number;
}

export function watchEventLoop(options: LoopMonitorOptions): LoopMonitor {
  const interval = options.intervalMs ?? 20;
  const idleTicks = options.idleTicks ?? 50;
  let last = 0;
  let lastUsage: ProcessUsage;
  let quiet = 0;
  let timer: NodeJS.Timeout | undefined;
  let schedule: ThreadSchedule | undefined;
  let usage: () => ProcessUsage;
  const tick = (): void => {
    const now = performance.now();
    const current = usage();
    const lag = heldMs(now - last - interval, lastUsage, current);
    last = now;
    lastUsage = current;
    if (lag >= options.thresholdMs) options.onLag(lag);
    if (!options.busy) return;
    quiet = options.busy() ? 0 : quiet + 1;
    if (quiet >= idleTicks) sleep();
  };
  const arm = (): void => {
    if (options.usage) usage = options.usage;
    else {
      schedule = ThreadSchedule.open();
      usage = () => threadUsage(schedule);
    }
    last = performance.now();
    lastUsage = usage();
    quiet = 0;
    timer = setInterval(tick, interval);
    // Never the reason a process stays alive.
    timer.unref();
  };
  const sleep = (): void => {
    clearInterval(timer);
    timer = undefined;
    schedule?.close();
    schedule = undefined;
  };
  if (!options.busy) arm();
  return {
    wake: () => {
      if (!timer) arm();
    },
    [Symbol.dispose]: sleep,
  };
}

/**
 * How much of a late tick the process held the loop for. On a machine with more runnable work
 * than cores (rollouts beside a trainer, a CI box), the scheduler takes the CPU away and every
 * timer fires late with no code of ours to blame. Where Linux says how long this thread waited in
 * the run queue, that wait is taken off, and the rest is the loop's own: running code, or blocked
 * in a synchronous syscall (`execSync`), which a handler can do too. Elsewhere, when the process
 * was preempted in the window, only the CPU time it burnt counts (every thread's: an upper bound),
 * otherwise the whole lag does.
 */
function heldMs(lagMs: number, before: ProcessUsage, after: ProcessUsage): number {
  if (before.waitingMs !== undefined && after.waitingMs !== undefined) return Math.max(0, lagMs - (after.waitingMs - before.waitingMs));
  if (after.involuntaryContextSwitches === before.involuntaryContextSwitches) return lagMs;
  const cpuMs = (after.userCPUTime - before.userCPUTime + after.systemCPUTime - before.systemCPUTime) / 1_000;
  return Math.min(lagMs, cpuMs);
}

function threadUsage(schedule: ThreadSchedule | undefined): ProcessUsage {
  const { userCPUTime, systemCPUTime, involuntaryContextSwitches } = process.resourceUsage();
  const waitingMs = schedule?.waitingMs();
  return waitingMs === undefined ? { userCPUTime, systemCPUTime, involuntaryContextSwitches } : { userCPUTime, systemCPUTime, involuntaryContextSwitches, waitingMs };
}

/**
 * The calling thread's `/proc/thread-self/schedstat` (Linux): time on a CPU, time waiting for one
 * (in ns), timeslices. Held open and read in place at each tick (a couple of µs; opening the file
 * each time costs ten times more). A monitor in a worker thread opens its own thread's.
 */
class ThreadSchedule {
  readonly #fd: number;
  readonly #buffer = Buffer.alloc(96);

  private constructor(fd: number) {
    this.#fd = fd;
  }

  /** Undefined where the file is not there (not Linux, a kernel without schedstats). */
  static open(): ThreadSchedule | undefined {
    try {
      const schedule = new ThreadSchedule(openSync('/proc/thread-self/schedstat', 'r'));
      if (schedule.waitingMs() !== undefined) return schedule;
      schedule.close();
    } catch {
      // Not readable here: the monitor falls back to the process's resource usage.
    }
    return undefined;
  }

  waitingMs(): number | undefined {
    const n = readSync(this.#fd, this.#buffer, 0, this.#buffer.length, 0);
    const waitingNs = Number(this.#buffer.toString('latin1', 0, n).split(' ')[1]);
    return Number.isFinite(waitingNs) ? waitingNs / 1e6 : undefined;
  }

  close(): void {
    closeSync(this.#fd);
  }
}
