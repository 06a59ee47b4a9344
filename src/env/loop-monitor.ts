/**
 * Event-loop lag detection by timer drift: a ticking timer that fires late measures how long the
 * loop was held. It catches what the router's per-call timing cannot: blocking in a handler's
 * code after an `await`, or outside any handler.
 */
export interface LoopMonitorOptions {
  readonly thresholdMs: number;
  /** How often to tick (default 20 ms). */
  readonly intervalMs?: number;
  /** The lag the process itself caused, in ms (see `heldMs`). */
  readonly onLag: (lagMs: number) => void;
  /** Reads the process's resource usage (default `process.resourceUsage`); for tests. */
  readonly usage?: () => ProcessUsage;
  /**
   * Whether there was work since the last tick (a call running or started). After `idleTicks`
   * ticks without, the monitor stops ticking until `wake()`: an idle server (no session open)
   * would otherwise wake 50 times a second to watch nothing.
   */
  readonly busy?: () => boolean;
  /** Quiet ticks before the monitor sleeps (default 50: a second at the default interval). */
  readonly idleTicks?: number;
}

/** A running monitor: `wake` starts it ticking again after it slept (work came). */
export interface LoopMonitor extends Disposable {
  wake(): void;
}

/** The part of `process.resourceUsage()` the monitor reads. */
export interface ProcessUsage {
  /** Microseconds. */
  readonly userCPUTime: number;
  /** Microseconds. */
  readonly systemCPUTime: number;
  readonly involuntaryContextSwitches: number;
}

export function watchEventLoop(options: LoopMonitorOptions): LoopMonitor {
  const interval = options.intervalMs ?? 20;
  const usage = options.usage ?? (() => process.resourceUsage());
  const idleTicks = options.idleTicks ?? 50;
  let last = 0;
  let lastUsage: ProcessUsage;
  let quiet = 0;
  let timer: NodeJS.Timeout | undefined;
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
  };
  arm();
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
 * timer fires late with no code of ours to blame. When the process was preempted in the window,
 * only the CPU time it burnt counts (a blocking handler burns it; waiting for a core does not);
 * otherwise the whole lag does, so a handler blocked in a synchronous syscall (`execSync`) is
 * still caught.
 */
function heldMs(lagMs: number, before: ProcessUsage, after: ProcessUsage): number {
  if (after.involuntaryContextSwitches === before.involuntaryContextSwitches) return lagMs;
  const cpuMs = (after.userCPUTime - before.userCPUTime + after.systemCPUTime - before.systemCPUTime) / 1_000;
  return Math.min(lagMs, cpuMs);
}
