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
}

/** The part of `process.resourceUsage()` the monitor reads. */
export interface ProcessUsage {
  /** Microseconds. */
  readonly userCPUTime: number;
  /** Microseconds. */
  readonly systemCPUTime: number;
  readonly involuntaryContextSwitches: number;
}

export function watchEventLoop(options: LoopMonitorOptions): Disposable {
  const interval = options.intervalMs ?? 20;
  const usage = options.usage ?? (() => process.resourceUsage());
  let last = performance.now();
  let lastUsage = usage();
  const timer = setInterval(() => {
    const now = performance.now();
    const current = usage();
    const lag = heldMs(now - last - interval, lastUsage, current);
    last = now;
    lastUsage = current;
    if (lag >= options.thresholdMs) options.onLag(lag);
  }, interval);
  // Never the reason a process stays alive.
  timer.unref();
  return { [Symbol.dispose]: () => clearInterval(timer) };
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
