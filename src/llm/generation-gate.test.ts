import { describe, expect, it } from 'vitest';
import { GenerationGate } from './generation-gate.js';

describe('GenerationGate', () => {
  it('lets completions through until paused, then holds them and releases them in the order asked; an aborted one leaves the queue', async () => {
    const gate = new GenerationGate();
    await gate.pass();
    gate.pause();
    const order: number[] = [];
    const abort = new AbortController();
    const held = [1, 2, 3].map((n) => gate.pass(n === 2 ? abort.signal : undefined).then(() => order.push(n), () => order.push(-n)));
    expect(gate.waiting).toBe(3);
    abort.abort(new Error('cancelled'));
    await held[1];
    expect(gate.waiting).toBe(2);
    expect(order).toEqual([-2]);
    expect(gate.resume()).toBe(2);
    await Promise.all(held);
    expect(order).toEqual([-2, 1, 3]);
    expect(gate.paused).toBe(false);
    await gate.pass();
  });
});
