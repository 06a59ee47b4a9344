/** The episode runner alone, driven through its hooks: what every driver (local, durable, worker, MCP) gets. */
import { afterEach, describe, expect, it } from 'vitest';
import { AgentEnv } from '../env/agent-env.js';
import type { RunEvent, SettledStepEvent } from '../events/run-events.js';
import type { EpisodeRecord } from '../replay/run-writer.js';
import { systemClock } from '../shared/clock.js';
import type { JsonValue } from '../shared/json.js';
import { breather, EpisodeRunner, type EpisodeHooks } from './episode-runner.js';
import { randomPolicy } from './policy.js';

const envs: AgentEnv[] = [];
afterEach(async () => {
  await Promise.all(envs.splice(0).map((e) => e[Symbol.asyncDispose]()));
});

async function setup(dir: string): Promise<{ env: AgentEnv; runner: EpisodeRunner; events: RunEvent[]; initial: JsonValue }> {
  const env = await AgentEnv.open(dir, { toolOptions: { latency_scale: 0.01, step_ms: 1 } });
  envs.push(env);
  const events: RunEvent[] = [];
  const initial = env.definition.initialStates[0] ?? null;
  const runner = new EpisodeRunner({ env, policy: randomPolicy, clock: systemClock, seed: 1, maxSteps: 3, initialStates: [initial], emit: (e) => events.push(e), breathe: breather(() => undefined) });
  env.events.onAny((e) => {
    if (e.type === 'trace_settled') events.push(runner.committed(e));
  });
  return { env, runner, events, initial };
}

/** Hooks that record what the runner asked for, in order. */
function recordingHooks(extra: Partial<EpisodeHooks> = {}): { hooks: EpisodeHooks; calls: string[]; settled: SettledStepEvent[]; records: (EpisodeRecord | undefined)[] } {
  const calls: string[] = [];
  const settled: SettledStepEvent[] = [];
  const records: (EpisodeRecord | undefined)[] = [];
  const hooks: EpisodeHooks = {
    starting: async (i) => void calls.push(`starting ${i}`),
    dispatching: async (i, call) => void calls.push(`dispatching ${i} ${call.trace_id}`),
    initialState: (id) => void calls.push(`initial ${id}`),
    settled: (step) => void settled.push(step),
    storeFailed: (err) => void calls.push(`store failed ${err.code}`),
    close: async (record, finished) => {
      records.push(record);
      calls.push(`close ${finished.reason}`);
      return true;
    },
    ended: (i) => void calls.push(`ended ${i}`),
    ...extra,
  };
  return { hooks, calls, settled, records };
}

describe('EpisodeRunner', () => {
  it('runs an episode through its hooks: journal before acting, each call noted before dispatch, closed with its record', async () => {
    const { runner, events } = await setup('fixtures/weather');
    const { hooks, calls, records } = recordingHooks();
    const finished = await runner.run(0, hooks, new AbortController().signal);
    expect(finished).toMatchObject({ type: 'episode_finished', episode: 0, steps: 3, reason: 'max_steps' });
    expect(calls).toEqual(['starting 0', 'initial initial-0', 'dispatching 0 ep-0:1', 'dispatching 0 ep-0:2', 'dispatching 0 ep-0:3', 'close max_steps', 'ended 0']);
    expect(records[0]).toMatchObject({ episode: 0, instance_id: 'ep-0', initial_state_id: 'initial-0', steps: 3, final_seq: 3, truncated: true });
    // Every settled step carries the actions its policy chose among.
    const steps = events.filter((e): e is SettledStepEvent => e.type === 'trace_settled');
    expect(steps.map((s) => [s.trace_id, s.available_actions?.includes('get_weather')])).toEqual([
      ['ep-0:1', true],
      ['ep-0:2', true],
      ['ep-0:3', true],
    ]);
    expect(events[0]).toMatchObject({ type: 'episode_started', episode: 0, initial_state_id: 'initial-0' });
    expect(events.at(-1)).toBe(finished);
  });

  it('continues from committed steps: a call in flight that is not idempotent settles as TOOL_LOST, saying how to declare it', async () => {
    const { env, runner, initial } = await setup('fixtures/weather');
    await env.store.init('ep-0', initial, 0);
    const rewound: string[] = [];
    const { hooks, calls, settled } = recordingHooks({
      prior: () => ({ steps: [], inflight: { trace_id: 'ep-0:1', action: 'get_weather', params: { city: '上海' }, available_actions: ['get_weather'] } }),
      rewind: async (id, seq) => void rewound.push(`${id}@${seq}`),
    });
    const finished = await runner.run(0, hooks, new AbortController().signal);
    expect(rewound).toEqual(['ep-0@0']);
    expect(calls[0]).not.toBe('starting 0');
    expect(settled[0]).toMatchObject({ trace_id: 'ep-0:1', step: 1, status: 'failed', error: { code: 'TOOL_LOST', hint: expect.stringContaining('"tools": {"get_weather": {"idempotent": true}}') } });
    // The episode goes on after the lost call: the next call is the instance's second.
    expect(calls).toContain('dispatching 0 ep-0:2');
    expect(finished.steps).toBe(3);
  });

  it('re-runs an idempotent call that was in flight instead, as the next call of its instance', async () => {
    const { env, runner, initial } = await setup('fixtures/distributed');
    await env.store.init('ep-0', initial, 0);
    const dispatched: { trace_id: string; action: string; params: unknown }[] = [];
    const { hooks, settled } = recordingHooks({
      prior: () => ({ steps: [], inflight: { trace_id: 'ep-0:1', action: 'work', params: { label: 'redo' }, available_actions: ['work'] } }),
      rewind: async () => undefined,
      dispatching: async (_i, call) => void dispatched.push(call),
    });
    const finished = await runner.run(0, hooks, new AbortController().signal);
    expect(settled).toEqual([]);
    expect(dispatched[0]).toMatchObject({ trace_id: 'ep-0:2', action: 'work', params: { label: 'redo' } });
    expect(finished.steps).toBe(3);
  });
});
