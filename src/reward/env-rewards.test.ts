import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { scratch } from '../../commands/testing.js';
import { AgentEnv, defineEnv, type EnvManifest, type RewardEvent } from '../index.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

function manifest(extra: Partial<EnvManifest> = {}): EnvManifest {
  return {
    state: { type: 'object' },
    actions: [{ name: 'act', parameters: { type: 'object' } }],
    rewards: {
      type: 'object',
      properties: {
        judge: { type: 'number', delay_ms: 200, deadline_ms: 1_000, fallback: { value: 0 } },
        metric: { type: 'number', delay_ms: HOUR, deadline_ms: 2 * HOUR, fallback: { strategy: 'historical_mean' } },
        human: { type: 'number', delay_ms: DAY, deadline_ms: 2 * DAY, fallback: { value: 0.5 } },
      },
    },
    ...extra,
  };
}

const tmp = scratch();
afterAll(() => tmp.cleanup());

afterEach(() => {
  vi.useRealTimers();
});

describe('env.rewards', () => {
  it('applies each deadline when it falls due, by its own timer: 200 ms, 1 h and 24 h delays on a fake clock', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    await using env = await AgentEnv.create(await defineEnv(manifest()), { handlers: { act: async () => ({ observation: null }) } });
    const events: RewardEvent[] = [];
    env.events.onAny((e) => void (e.type.startsWith('reward_') && events.push(e as RewardEvent)));
    const agent = env.createInstance();
    await agent.reset({});
    const a = (await agent.step({ name: 'act' })).info.trace_id;
    const b = (await agent.step({ name: 'act' })).info.trace_id;
    await vi.advanceTimersByTimeAsync(200);
    env.rewards.submit({ trace_id: a, source: 'judge', value: 0.9 });
    env.rewards.submit({ trace_id: a, source: 'metric', value: 0.6 });
    await vi.advanceTimersByTimeAsync(800);
    expect(env.rewards.entries(b)?.['judge']).toMatchObject({ status: 'fallback', value: 0 });
    await vi.advanceTimersByTimeAsync(2 * HOUR);
    // The business metric for b never came: the mean of what arrived for the same action stands in.
    expect(env.rewards.entries(b)?.['metric']).toMatchObject({ status: 'fallback', imputed: { value: 0.6, strategy: 'historical_mean', sample_size: 1 } });
    await vi.advanceTimersByTimeAsync(DAY);
    env.rewards.submit({ trace_id: a, source: 'human', value: 1 });
    await vi.advanceTimersByTimeAsync(DAY);
    expect(env.rewards.entries(a)?.['human']).toMatchObject({ status: 'arrived', value: 1, delay_ms: DAY + 2 * HOUR + 1_000 });
    expect(env.rewards.entries(b)?.['human']).toMatchObject({ status: 'fallback', value: 0.5 });
    expect(events.map((e) => `${e.type}:${e.source}:${e.trace_id === a ? 'a' : 'b'}`)).toEqual([
      'reward_arrived:judge:a',
      'reward_arrived:metric:a',
      'reward_imputed:judge:b',
      'reward_imputed:metric:b',
      'reward_arrived:human:a',
      'reward_imputed:human:b',
    ]);
    expect(env.rewards.sla()['human']).toMatchObject({ expected: 2, arrived: 1, fallback: 1, share_imputed: 0.5 });
  });

  it('refuses a tool that reports a delayed source, and bindings that do not fit', async () => {
    await using env = await AgentEnv.create(await defineEnv(manifest()), { handlers: { act: async () => ({ observation: null, rewards: { judge: 1 } }) } });
    const agent = env.createInstance();
    await agent.reset({});
    const r = await agent.step({ name: 'act' });
    expect(r.info).toMatchObject({ status: 'failed', error: { code: 'TOOL_CONTRACT', message: expect.stringContaining("reported reward 'judge', which comes from outside") } });
    const bad = await defineEnv(manifest({ reward_sources: { nope: { external: {} }, judge: { tool: {} }, metric: { external: {}, module: 'x.ts' }, human: { external: {}, export: 'f' } } })).catch((e: unknown) => e);
    expect(bad).toMatchObject({
      code: 'DEFINITION_INVALID',
      issues: expect.arrayContaining([
        expect.objectContaining({ pointer: '/reward_sources/nope', message: expect.stringContaining('does not declare') }),
        expect.objectContaining({ pointer: '/reward_sources/judge/tool', message: expect.stringContaining('delay_ms 200') }),
        expect.objectContaining({ pointer: '/reward_sources/metric', message: expect.stringContaining('exactly one binding') }),
        expect.objectContaining({ pointer: '/reward_sources/human/export' }),
      ]) as unknown,
    });
  });

  it('a hostile reward module fails its own value, with the reason, and nothing else', async () => {
    const dir = await tmp.dir('agent-hostile-reward-');
    await writeFile(path.join(dir, 'r.mjs'), 'export const throwsNull = () => { throw null; };\nexport const text = () => "x";\nexport const hang = () => new Promise(() => {});\nexport const ok = () => 1;\n');
    const def = await defineEnv(
      {
        state: { type: 'object' },
        actions: [{ name: 'act', parameters: { type: 'object' } }],
        rewards: { type: 'object', properties: Object.fromEntries(['a', 'b', 'c', 'd'].map((n) => [n, { type: 'number', delay_ms: 10, ...(n === 'a' ? { fallback: { value: 0 } } : {}) }])) },
        reward_sources: { a: { module: 'r.mjs', export: 'throwsNull' }, b: { module: 'r.mjs', export: 'text' }, c: { module: 'r.mjs', export: 'hang', timeout_ms: 50 }, d: { module: 'r.mjs', export: 'ok' } },
      },
      { dir },
    );
    await using env = await AgentEnv.create(def, { handlers: { act: async () => ({ observation: 1 }) } });
    const agent = env.createInstance();
    await agent.reset({});
    const r = await agent.step({ name: 'act' });
    expect(r.info.status).toBe('resolved');
    await env.rewards.settle();
    expect(env.rewards.entries(r.info.trace_id)).toMatchObject({
      a: { status: 'fallback', value: 0, imputed: { reason: expect.stringContaining('threw null') } },
      b: { status: 'failed', error: expect.stringContaining("returned x, not a number") },
      c: { status: 'failed', error: expect.stringContaining('timed out after 50 ms') },
      d: { status: 'arrived', value: 1 },
    });
  });
});
