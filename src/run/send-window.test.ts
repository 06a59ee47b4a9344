import { describe, expect, it } from 'vitest';
import { breather } from './episode-runner.js';
import { SendWindow } from './send-window.js';

describe('SendWindow', () => {
  it('lets a thread send up to its limit, then holds its episodes until the run has written a batch', async () => {
    const window = new SendWindow(2);
    expect(window.needsDrain).toBe(false);
    window.sent();
    await window.drained();
    window.sent();
    expect(window.needsDrain).toBe(true);
    const order: string[] = [];
    const first = window.drained().then(() => order.push('first'));
    const second = window.drained().then(() => order.push('second'));
    await Promise.resolve();
    expect(order).toEqual([]);
    window.answered();
    await Promise.all([first, second]);
    expect(order).toEqual(['first', 'second']);
    expect(window.open).toBe(1);
  });

  it("holds an episode's next step through the breather while the window is full", async () => {
    const window = new SendWindow(1);
    const breathe = breather(() => window);
    window.sent();
    let stepped = false;
    const step = breathe().then(() => (stepped = true));
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(stepped).toBe(false);
    window.answered();
    await step;
    expect(stepped).toBe(true);
  });

  it('never counts below zero: a stray answer does not widen the window', () => {
    const window = new SendWindow(1);
    window.answered();
    window.sent();
    expect(window.needsDrain).toBe(true);
  });
});
