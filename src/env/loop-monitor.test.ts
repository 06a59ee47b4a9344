import { describe, expect, it, vi } from 'vitest';
import { watchEventLoop, type ProcessUsage } from './loop-monitor.js';

/** Holds the loop for `ms`, then waits for the monitor's next tick to report (or not). */
async function blockAndTick(ms: number, usage?: () => ProcessUsage): Promise<number[]> {
  const lags: number[] = [];
  using _monitor = watchEventLoop({ thresholdMs: 30, intervalMs: 5, ...(usage ? { usage } : {}), onLag: (lag) => lags.push(lag) });
  await new Promise((r) => setTimeout(r, 10));
  // CPU time, not wall time: on a busy machine the block is still as long as the work.
  const start = process.cpuUsage();
  for (let used = 0; used < ms * 1_000; ) {
    const { user, system } = process.cpuUsage(start);
    used = user + system;
  }
  // Two intervals: the late tick has fired, and reported, by then.
  await new Promise((r) => setTimeout(r, 12));
  return lags;
}

describe('watchEventLoop', () => {
  it('reports a block of the loop with its length', async () => {
    // By what the system says of this thread (Linux's schedstat), and by the process's usage elsewhere.
    for (const usage of [undefined, () => process.resourceUsage()]) {
      const lags = await blockAndTick(80, usage);
      expect(lags.length).toBeGreaterThanOrEqual(1);
      expect(Math.max(...lags)).toBeGreaterThanOrEqual(30);
    }
  });

  it("takes the thread's time waiting for a core off a late tick", async () => {
    // The thread queued for a core through every window (the scheduler's doing): nothing held,
    // however busy the process's other threads kept its CPU counters.
    let waitingMs = 0;
    let switches = 0;
    let cpuUs = 0;
    const queued = (): ProcessUsage => ({ userCPUTime: (cpuUs += 1_000_000), systemCPUTime: 0, involuntaryContextSwitches: switches++, waitingMs: (waitingMs += 1_000) });
    expect(await blockAndTick(80, queued)).toEqual([]);
    // None of it waiting: the whole block is the loop's, whatever the CPU counters say.
    const running = (): ProcessUsage => ({ userCPUTime: 0, systemCPUTime: 0, involuntaryContextSwitches: switches++, waitingMs: 0 });
    expect(Math.max(...(await blockAndTick(80, running)))).toBeGreaterThanOrEqual(30);
  });

  it('does not blame the process for a late tick while it was preempted and burnt no CPU', async () => {
    // The scheduler's doing, as on an oversubscribed machine: switches counted, no CPU time spent.
    let switches = 0;
    const lags = await blockAndTick(80, () => ({ userCPUTime: 0, systemCPUTime: 0, involuntaryContextSwitches: switches++ }));
    expect(lags).toEqual([]);
  });

  it('counts only the CPU time the process burnt while it was preempted', async () => {
    let switches = 0;
    let cpuUs = 0;
    // Every tick window shows 40 ms of CPU and a preemption: 40 ms held, whatever the wall lag.
    const lags = await blockAndTick(80, () => ({ userCPUTime: (cpuUs += 40_000), systemCPUTime: 0, involuntaryContextSwitches: switches++ }));
    expect(lags.length).toBeGreaterThanOrEqual(1);
    expect(Math.max(...lags)).toBe(40);
  });

  it('watching for work, sleeps until woken and after its quiet ticks, and ticks again once woken', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
    try {
      let reads = 0;
      let busy = true;
      const usage = (): ProcessUsage => ({ userCPUTime: reads++, systemCPUTime: 0, involuntaryContextSwitches: 0 });
      using monitor = watchEventLoop({ thresholdMs: 30, intervalMs: 10, idleTicks: 3, busy: () => busy, usage, onLag: () => undefined });
      vi.advanceTimersByTime(100);
      expect(reads).toBe(0); // no work yet: start-up is nobody's handler
      monitor.wake();
      vi.advanceTimersByTime(100);
      expect(reads).toBe(11); // armed, then a tick every 10 ms while busy
      busy = false;
      vi.advanceTimersByTime(1_000);
      expect(reads).toBe(14); // three quiet ticks, then no more
      monitor.wake();
      busy = true;
      vi.advanceTimersByTime(50);
      expect(reads).toBe(20);
      monitor.wake(); // awake already: no second timer
      vi.advanceTimersByTime(10);
      expect(reads).toBe(21);
    } finally {
      vi.useRealTimers();
    }
  });
});
