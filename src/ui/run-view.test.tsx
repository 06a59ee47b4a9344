import { render } from 'ink-testing-library';
import { describe, expect, it, vi } from 'vitest';
import { Emitter } from '../shared/emitter.js';
import type { RunEvent } from '../events/run-events.js';
import type { RunProgress } from '../run/run-stats.js';
import { LiveRunView, RunPanel } from './run-view.js';
import type { RunSource } from './run-source.js';

const config = { env: 'weather', episodes: 20, concurrency: 8, max_steps: 10, seed: 3, policy: 'random' };

function progress(overrides: Partial<RunProgress> = {}): RunProgress {
  return {
    started_at: 0,
    now: 10_000,
    episodes_total: 20,
    episodes_done: 5,
    episodes_by_reason: { max_steps: 5 },
    steps: 123,
    failed_steps: 2,
    steps_per_second: 12.3,
    pending: [
      { trace_id: 'ep-3:4', tool: 'get_weather', started_at: 3_000 },
      { trace_id: 'ep-7:1', tool: 'get_weather', started_at: 9_800 },
    ],
    tools: { get_weather: { calls: 125, failed: 2, total_ms: 40_000, errors: { TOOL_TIMEOUT: 2 } } },
    recent_rewards: [{ source: 'api_latency', value: 312.5, trace_id: 'ep-2:9', status: 'arrived' }, { source: 'llm_score', value: 0.4, trace_id: 'ep-1:2', status: 'late' }],
    reward_flow: { llm_score: { expected: 10, arrived: 6, fallback: 1, late: 1, failed: 0, pending: 2, imputed: 2 } },
    rewards_by_source: {},
    episode_rewards: { count: 5, sum: 10, min: 1, max: 3 },
    loop_blocked: [],
    errors: { TOOL_TIMEOUT: 2 },
    ...overrides,
  };
}

describe('RunPanel', () => {
  it('shows a distributed run\'s workers, and says loudly when there are none', () => {
    const alive = { queue: 'agent:queue', alive: [{ id: 'a:1:x', host: 'a', pid: 1, running: 3, concurrency: 8 }, { id: 'b:2:y', host: 'b', pid: 2, running: 8, concurrency: 8 }] };
    expect(render(<RunPanel config={config} progress={progress({ workers: alive })} warnings={[]} />).lastFrame()).toContain('Workers 2 alive · 11/16 episodes in hand (a:1:x, b:2:y)');
    const none = render(<RunPanel config={config} progress={progress({ workers: { queue: 'pool-b', alive: [], none_since: 7_000 } })} warnings={[]} />).lastFrame() ?? '';
    expect(none).toContain('no live workers on queue pool-b');
    expect(none).toContain('--queue pool-b');
    expect(none).toContain('(3.0s)');
  });

  it('shows progress, pending trace ids with their age (oldest first), errors by tool and latest rewards', () => {
    const { lastFrame } = render(<RunPanel config={config} progress={progress()} warnings={[]} />);
    const frame = lastFrame() ?? '';
    expect(frame).toContain('5/20 episodes · 123 steps · 12.3 steps/s');
    expect(frame).toContain('██████░░░░░░░░░░░░░░░░░░');
    expect(frame.indexOf('ep-3:4')).toBeLessThan(frame.indexOf('ep-7:1'));
    expect(frame).toMatch(/ep-3:4\s+get_weather\s+7\.0s/);
    expect(frame).toMatch(/ep-7:1\s+get_weather\s+200ms/);
    expect(frame).toContain('get_weather: 2/125 failed (TOOL_TIMEOUT×2)');
    expect(frame).toContain('api_latency = 312.5 (ep-2:9)');
    expect(frame).toContain('llm_score = 0.4 (ep-1:2, late)');
    expect(frame).toMatch(/llm_score\s+2 pending · 6 arrived · 2 imputed · 1 late/);
  });

  it("shows a benchmark's success so far, and a paused store in red", () => {
    const { lastFrame } = render(<RunPanel config={config} progress={progress({ store_down: { since: 5_800, store: 'redis://127.0.0.1:6379/0' } })} warnings={[]} headline="success so far 7/9 (77.8%)" />);
    expect(lastFrame()).toContain('success so far 7/9 (77.8%)');
    expect(lastFrame()).toMatch(/⏸ paused: state store redis:\/\/127\.0\.0\.1:6379\/0 unreachable for 4\.\ds, retrying/);
  });

  it('says when nothing is pending and nothing failed', () => {
    const { lastFrame } = render(<RunPanel config={config} progress={progress({ pending: [], tools: {}, recent_rewards: [] })} warnings={['tool x blocked']} />);
    expect(lastFrame()).toMatch(/Pending[^\n]*\n\s+none/);
    expect(lastFrame()).toContain('⚠ tool x blocked');
  });
});

describe('LiveRunView', () => {
  it('adds a line per finished episode as events arrive, and stops its timer on unmount', async () => {
    const events = new Emitter<RunEvent>();
    let current = progress({ episodes_done: 0, pending: [] });
    const source: RunSource = { config, progress: () => current, events };
    const { lastFrame, unmount } = render(<LiveRunView source={source} />);
    expect(lastFrame()).toContain('0/20 episodes');
    current = progress({ episodes_done: 1, pending: [] });
    // The episode's return: its steps' rewards, a delayed value that landed before it ended included, one still pending said.
    const settled = { type: 'trace_settled', time: 1, instance_id: 'ep-0', episode: 0, action: 'a', params: {}, seq_before: 0, status: 'resolved', done: false, seq: 1, duration_ms: 1 } as const;
    const pending = { status: 'pending', value: null, arrived_at: null, delay_ms: null } as const;
    events.emit({ ...settled, trace_id: 'ep-0:1', step: 1, reward: 3000, rewards: { judge: pending } });
    events.emit({ ...settled, trace_id: 'ep-0:2', step: 2, reward: 20, rewards: { judge: pending } });
    events.emit({ type: 'reward_arrived', time: 1, instance_id: 'ep-0', trace_id: 'ep-0:1', episode: 0, step: 1, source: 'judge', value: 1.4, key: 'judge', delay_ms: 5, reward: 3001.4 });
    events.emit({ type: 'episode_finished', time: 1, instance_id: 'ep-0', episode: 0, steps: 10, reward: 3020, reason: 'max_steps', duration_ms: 1200 });
    await vi.waitFor(() => expect(lastFrame()).toContain('✓ episode 0: 10 steps, reward 3021.4 (1 pending), 1.2s (max_steps)'));
    expect(lastFrame()).toContain('1/20 episodes');
    events.emit({ type: 'loop_blocked', time: 2, instance_id: 'ep-1', trace_id: 'ep-1:1', tool: 'crunch', blocked_ms: 180 });
    await vi.waitFor(() => expect(lastFrame()).toContain("tool 'crunch' blocked the event loop for 180ms"));
    unmount();
    expect(events.hasListeners).toBe(false);
  });
});
