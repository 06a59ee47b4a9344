import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DeadlineQueue, type Deadline } from './deadlines.js';

function entry(log: string[], name: string): Deadline {
  return { at: 0, queued: false, expire: () => void log.push(name) };
}

describe('DeadlineQueue', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('expires entries in the order they were added, each its duration after it was added, and not the cancelled ones', async () => {
    const q = new DeadlineQueue(100);
    const log: string[] = [];
    const [a, b, c] = [entry(log, 'a'), entry(log, 'b'), entry(log, 'c')];
    q.add(a);
    await vi.advanceTimersByTimeAsync(30);
    q.add(b);
    q.add(c);
    q.cancel(b);
    await vi.advanceTimersByTimeAsync(69);
    expect(log).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(log).toEqual(['a']);
    await vi.advanceTimersByTimeAsync(29);
    expect(log).toEqual(['a']);
    await vi.advanceTimersByTimeAsync(1);
    expect(log).toEqual(['a', 'c']);
    expect(q.size).toBe(0);
  });

  it('one call after another (a sequential agent) re-arms no timer', () => {
    const q = new DeadlineQueue(1_000);
    const log: string[] = [];
    const a = entry(log, 'a');
    q.add(a);
    expect(vi.getTimerCount()).toBe(1);
    q.cancel(a);
    const b = entry(log, 'b');
    q.add(b);
    expect(vi.getTimerCount()).toBe(1);
    q.cancel(b);
    vi.advanceTimersByTime(5_000);
    expect(vi.getTimerCount()).toBe(0);
    expect(log).toEqual([]);
  });

  it('an entry added by an expiry (a retry) keeps its place behind the older live ones', async () => {
    const q = new DeadlineQueue(100);
    const log: string[] = [];
    const retry = entry(log, 'retry');
    const first: Deadline = { at: 0, queued: false, expire: () => (log.push('first'), q.add(retry)) };
    q.add(first);
    await vi.advanceTimersByTimeAsync(10);
    q.add(entry(log, 'second'));
    await vi.advanceTimersByTimeAsync(90);
    expect(log).toEqual(['first']);
    await vi.advanceTimersByTimeAsync(10);
    expect(log).toEqual(['first', 'second']);
    await vi.advanceTimersByTimeAsync(90);
    expect(log).toEqual(['first', 'second', 'retry']);
  });

  it('compacts finished entries under load and still expires the live ones among them', async () => {
    const q = new DeadlineQueue(50);
    const log: string[] = [];
    const live = entry(log, 'live');
    q.add(live);
    for (let i = 0; i < 5_000; i++) {
      const e = entry(log, `done${i}`);
      q.add(e);
      q.cancel(e);
    }
    const late = entry(log, 'late');
    q.add(late);
    expect(q.size).toBe(2);
    await vi.advanceTimersByTimeAsync(50);
    expect(log).toEqual(['live', 'late']);
  });
});

describe('DeadlineQueue on real timers', () => {
  it('does not hold the event loop open once no entry is live (this file fails on a ref\'d timer left behind)', () => {
    const q = new DeadlineQueue(60_000);
    const e: Deadline = { at: 0, queued: false, expire: () => undefined };
    q.add(e);
    q.cancel(e);
    expect(q.size).toBe(0);
  });
});
