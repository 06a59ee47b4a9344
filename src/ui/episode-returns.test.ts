import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../events/run-events.js';
import { EpisodeReturns, returnText } from './episode-returns.js';

const pending = { status: 'pending', value: null, arrived_at: null, delay_ms: null } as const;
const settled = (step: number, reward: number, status: 'resolved' | 'failed', delayed: string[]): RunEvent => ({ type: 'trace_settled', time: step, instance_id: 'ep-3', trace_id: `ep-3:${step}`, episode: 3, step, action: 'a', params: {}, seq_before: 0, status, reward, done: false, seq: step, duration_ms: 1, rewards: Object.fromEntries(delayed.map((s) => [s, pending])) });
const landed = (type: 'reward_arrived' | 'reward_imputed' | 'reward_late' | 'reward_failed', step: number, source: string, reward: number): RunEvent =>
  ({ type, time: 10, instance_id: 'ep-3', trace_id: `ep-3:${step}`, episode: 3, step, source, value: 1, key: source, delay_ms: 5, reward }) as unknown as RunEvent;

describe('EpisodeReturns', () => {
  it('sums each step’s latest reward as delayed values land, counting what is still awaited', () => {
    const r = new EpisodeReturns();
    r.take(landed('reward_arrived', 1, 'tool', -0.5)); // before its step settles: the settle carries it
    r.take(settled(1, -0.5, 'resolved', ['judge', 'metric']));
    r.take(settled(2, 7, 'failed', ['judge']));
    expect(r.of(3)).toEqual({ value: -0.5, pending: 3 });
    r.take(landed('reward_arrived', 1, 'judge', 0.5));
    r.take(landed('reward_failed', 2, 'judge', 0));
    expect(r.of(3)).toEqual({ value: 0.5, pending: 1 });
    r.take(landed('reward_imputed', 1, 'metric', 0.25));
    r.take(landed('reward_late', 1, 'metric', 1.5));
    expect(r.of(3)).toEqual({ value: 1.5, pending: 0 });
    expect(returnText({ value: 1.5, pending: 2 }, (n) => n.toFixed(1))).toBe('1.5 (2 pending)');
    r.forget(3);
    r.take(landed('reward_late', 1, 'metric', 9));
    expect(r.of(3)).toEqual({ value: 0, pending: 0 });
  });
});
