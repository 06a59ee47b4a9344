/** The process-start queue: bounded starts in flight, in order, cancellable while waiting, capped when the machine runs out. */
import { describe, expect, it } from 'vitest';
import { StartQueue, type StartSlot } from './process-starts.js';

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('StartQueue', () => {
  it('lets `limit` starts be in flight, the rest wait in order; a started process frees its start for the next', async () => {
    const q = new StartQueue(2);
    const granted: number[] = [];
    const slots = new Map<number, StartSlot>();
    for (let i = 0; i < 5; i++) void q.acquire(new AbortController().signal).then((s) => (granted.push(i), slots.set(i, s)));
    await turn();
    expect(granted).toEqual([0, 1]);
    expect(q.size).toEqual({ starting: 2, running: 0, waiting: 3 });
    slots.get(0)?.started();
    slots.get(0)?.started();
    await turn();
    await turn();
    expect(granted).toEqual([0, 1, 2]);
    expect(q.size).toEqual({ starting: 2, running: 1, waiting: 2 });
  });

  it('a call cancelled while it waits never gets a start, and its place goes to the next', async () => {
    const q = new StartQueue(1);
    const first = await q.acquire(new AbortController().signal);
    const cancelled = new AbortController();
    const waiting = q.acquire(cancelled.signal);
    const next = q.acquire(new AbortController().signal);
    cancelled.abort(new Error('interrupted'));
    await expect(waiting).rejects.toThrow('interrupted');
    first.done();
    await expect(next).resolves.toBeDefined();
    expect(q.size).toEqual({ starting: 1, running: 0, waiting: 0 });
    await expect(q.acquire(cancelled.signal)).rejects.toThrow('interrupted');
  });

  it('once a start failed for want of resources, no more run at once than ran then', async () => {
    const q = new StartQueue(8);
    const running = await Promise.all([0, 1, 2].map(() => q.acquire(new AbortController().signal)));
    for (const s of running) s.started();
    q.exhausted();
    let granted = false;
    void q.acquire(new AbortController().signal).then(() => (granted = true));
    await turn();
    expect(granted).toBe(false);
    running[0]?.done();
    await turn();
    await turn();
    expect(granted).toBe(true);
  });
});
