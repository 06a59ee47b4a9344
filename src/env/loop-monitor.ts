/**
 * Event-loop lag detection by timer drift: a ticking timer that fires late measures how long the
 * loop was held. It catches what the router's per-call timing cannot: blocking in a handler's
 * code after an `await`, or outside any handler.
 */
export interface LoopMonitorOptions {
  readonly thresholdMs: number;
  /** How often to tick (default 20 ms). */
  readonly intervalMs?: number;
  readonly onLag: (lagMs: number) => void;
}

export function watchEventLoop(options: LoopMonitorOptions): Disposable {
  const interval = options.intervalMs ?? 20;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const lag = now - last - interval;
    last = now;
    if (lag >= options.thresholdMs) options.onLag(lag);
  }, interval);
  // Never the reason a process stays alive.
  timer.unref();
  return { [Symbol.dispose]: () => clearInterval(timer) };
}
