import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratch } from '../../commands/testing.js';
import { AgentEnv, defineEnv, type EnvEventOf, type EnvManifest } from '../index.js';
import { startFakeLlmServer, type FakeLlmServer, type FakeReply, type FakeRequest } from '../llm/fake-llm-server.js';
import { fillTemplate } from '../schema/judge-template.js';
import { parseScore } from './llm-judge.js';

const tmp = scratch();
let dir: string;
const KEY = 'AGENT_TEST_JUDGE_KEY';

beforeAll(async () => {
  dir = await tmp.dir('agent-judge-');
  await writeFile(path.join(dir, 'judge.md'), 'User in {{state_before.city}} asked {{action}} {{params}}; answer {{observation}}. Score from {{min}} to {{max}}.');
  process.env[KEY] = 'test-key';
});
afterAll(async () => {
  process.env[KEY] = '';
  await tmp.cleanup();
});

function manifest(judge: Record<string, unknown>, extra: Partial<EnvManifest> = {}): EnvManifest {
  return {
    state: { type: 'object', properties: { city: { type: 'string' }, risky: { type: 'boolean' } } },
    actions: [{ name: 'ask', parameters: { type: 'object', properties: { q: { type: 'string' } } } }],
    rewards: { type: 'object', properties: { quality: { type: 'number', minimum: 0, maximum: 1, delay_ms: 200, deadline_ms: 60_000, fallback: { value: 0.5 } } } },
    reward_sources: { quality: { judge: { prompt: 'judge.md', api_key_env: KEY, ...judge } } },
    ...extra,
  };
}

async function judged(fake: FakeLlmServer, judge: Record<string, unknown>, steps = 1, extra: Partial<EnvManifest> = {}): Promise<{ env: AgentEnv; traces: string[]; arrivals: EnvEventOf<'reward_arrived'>[]; calls: EnvEventOf<'llm_call'>[] }> {
  const env = await AgentEnv.create(await defineEnv(manifest({ base_url: fake.url, ...judge }, extra), { dir }), { handlers: { ask: async (p) => ({ observation: { echo: p['q'] ?? null } }) } });
  const arrivals: EnvEventOf<'reward_arrived'>[] = [];
  env.events.on('reward_arrived', (e) => arrivals.push(e));
  const calls: EnvEventOf<'llm_call'>[] = [];
  env.events.on('llm_call', (e) => calls.push(e));
  const agent = env.createInstance();
  await agent.reset({ city: '上海' });
  const traces: string[] = [];
  for (let i = 0; i < steps; i++) traces.push((await agent.step({ name: 'ask', params: { q: `q${i}` } })).info.trace_id);
  await env.rewards.settle();
  return { env, traces, arrivals, calls };
}

async function withFake<T>(reply: (req: FakeRequest, n: number) => FakeReply, body: (fake: FakeLlmServer) => Promise<T>): Promise<T> {
  await using fake = await startFakeLlmServer(reply);
  return await body(fake);
}

describe('the LLM judge', () => {
  it('reads a score out of an answer: a labelled one first, else the last number', () => {
    expect(parseScore('0.8')).toBe(0.8);
    expect(parseScore('The answer is good. Score: 0.75')).toBe(0.75);
    expect(parseScore('Step 1 was fine, step 2 better; overall 9')).toBe(9);
    expect(parseScore('score = -1e-1')).toBe(-0.1);
    expect(parseScore('no idea')).toBeUndefined();
    expect(fillTemplate('{{a.b}} / {{ c }} / {{missing}}', { a: { b: 'x' }, c: [1] })).toBe('x / [\n  1\n] / (none)');
  });

  it('judges each step through the Anthropic Messages API, off the critical path, with its cost recorded', async () => {
    await withFake(
      () => ({ text: 'Looks right. score: 0.9', inputTokens: 1_000, outputTokens: 100 }),
      async (fake) => {
        const { env, traces, arrivals } = await judged(fake, { provider: 'anthropic', model: 'claude-sonnet-4-5' }, 2);
        await using _ = env;
        for (const t of traces) expect(env.rewards.entries(t)?.['quality']).toMatchObject({ status: 'arrived', value: 0.9 });
        expect(fake.requests).toHaveLength(2);
        expect(fake.requests[0]).toMatchObject({ provider: 'anthropic', body: { model: 'claude-sonnet-4-5' } });
        expect(JSON.stringify(fake.requests[0]?.headers)).toContain('test-key');
        expect(fake.requests[0]?.body.messages[0]?.content).toBe('User in 上海 asked ask {\n  "q": "q0"\n}; answer {\n  "echo": "q0"\n}. Score from 0 to 1.');
        // claude-sonnet-4: $3 / $15 per million tokens.
        expect(env.rewards.sourceStats()['quality']).toMatchObject({ calls: 2, input_tokens: 2_000, output_tokens: 200, cost_usd: 0.009 });
        // And per call, on the value it produced (so it lands in the reward log).
        expect(arrivals.map((e) => e.cost)).toEqual([
          { input_tokens: 1_000, output_tokens: 100, usd: 0.0045 },
          { input_tokens: 1_000, output_tokens: 100, usd: 0.0045 },
        ]);
      },
    );
  });

  it('speaks to any OpenAI-compatible server (vLLM, Ollama) through its base URL', async () => {
    await withFake(
      () => ({ text: '0.4' }),
      async (fake) => {
        const { env, traces } = await judged(fake, { provider: 'openai', model: 'qwen2.5-7b', base_url: `${fake.url}/v1`, system: 'You are a strict grader.' });
        await using _ = env;
        expect(env.rewards.entries(traces[0] as string)?.['quality']).toMatchObject({ status: 'arrived', value: 0.4 });
        expect(fake.requests[0]?.body.messages[0]).toEqual({ role: 'system', content: 'You are a strict grader.' });
        // An unknown model has no price: tokens are counted, money is not.
        expect(env.rewards.sourceStats()['quality']).toMatchObject({ calls: 1, cost_usd: null });
      },
    );
  });

  it('honours 429 retry-after and retries 5xx before giving up', async () => {
    await withFake(
      (_req, n) => (n === 1 ? { status: 429, headers: { 'retry-after-ms': '20' } } : n === 2 ? { status: 503, headers: { 'retry-after-ms': '5' } } : { text: 'score: 1' }),
      async (fake) => {
        const { env, traces } = await judged(fake, { provider: 'anthropic', model: 'claude-haiku-4-5', max_retries: 3 });
        await using _ = env;
        expect(fake.requests).toHaveLength(3);
        expect(env.rewards.entries(traces[0] as string)?.['quality']).toMatchObject({ status: 'arrived', value: 1 });
      },
    );
    await withFake(
      () => ({ status: 500 }),
      async (fake) => {
        const { env, traces } = await judged(fake, { provider: 'anthropic', model: 'claude-haiku-4-5', max_retries: 1 });
        await using _ = env;
        expect(fake.requests).toHaveLength(2);
        // The source failed: its fallback applies at once, with the reason.
        expect(env.rewards.entries(traces[0] as string)?.['quality']).toMatchObject({ status: 'fallback', value: 0.5, imputed: { reason: expect.stringMatching(/the source failed: .*500/) } });
      },
    );
  });

  it('re-asks once on an answer without a score, then gives up; clamps or rejects an out-of-range one', async () => {
    await withFake(
      (_r, n) => ({ text: n === 1 ? 'It depends.' : '0.6' }),
      async (fake) => {
        const { env, traces, calls } = await judged(fake, { provider: 'anthropic', model: 'claude-haiku-4-5' });
        await using _ = env;
        expect(env.rewards.entries(traces[0] as string)?.['quality']?.value).toBe(0.6);
        // Each of the two calls is an llm_call event on the step it judged.
        expect(calls).toEqual([1, 2].map(() => expect.objectContaining({ role: 'judge', provider: 'anthropic', model: 'claude-haiku-4-5', trace_id: traces[0], source: 'quality', episode: 1, step: 1 })));
        expect(fake.requests[1]?.body.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
        expect(env.rewards.sourceStats()['quality']).toMatchObject({ calls: 2, reasked: 1 });
      },
    );
    await withFake(
      () => ({ text: 'I cannot grade this.' }),
      async (fake) => {
        const { env, traces } = await judged(fake, { provider: 'anthropic', model: 'claude-haiku-4-5' });
        await using _ = env;
        expect(fake.requests).toHaveLength(2);
        expect(env.rewards.entries(traces[0] as string)?.['quality']).toMatchObject({ status: 'fallback', imputed: { reason: expect.stringContaining('no usable score twice') } });
      },
    );
    await withFake(
      () => ({ text: 'score: 7' }),
      async (fake) => {
        const clamp = await judged(fake, { provider: 'anthropic', model: 'claude-haiku-4-5' });
        await using _a = clamp.env;
        expect(clamp.env.rewards.entries(clamp.traces[0] as string)?.['quality']?.value).toBe(1);
        const reject = await judged(fake, { provider: 'anthropic', model: 'claude-haiku-4-5', out_of_range: 'reject' });
        await using _b = reject.env;
        expect(reject.env.rewards.entries(reject.traces[0] as string)?.['quality']?.status).toBe('fallback');
      },
    );
  });

  it('stops calling once its budget is spent: the rest fall back', async () => {
    await withFake(
      () => ({ text: 'score: 0.8', inputTokens: 40, outputTokens: 10 }),
      async (fake) => {
        const { env, traces } = await judged(fake, { provider: 'anthropic', model: 'claude-haiku-4-5', budget: { tokens: 100 }, concurrency: 1 }, 4);
        await using _ = env;
        expect(fake.requests).toHaveLength(2);
        expect(traces.map((t) => env.rewards.entries(t)?.['quality']?.status)).toEqual(['arrived', 'arrived', 'fallback', 'fallback']);
        expect(env.rewards.sourceStats()['quality']).toMatchObject({ calls: 2, budget_exhausted: 2 });
      },
    );
  });

  it('judges only the steps `when` selects, or once per episode on its last step', async () => {
    await withFake(
      () => ({ text: 'score: 0.3' }),
      async (fake) => {
        const some = await judged(fake, { provider: 'anthropic', model: 'claude-haiku-4-5', when: "params.q == 'q1'" }, 3);
        await using _a = some.env;
        expect(some.traces.map((t) => some.env.rewards.entries(t)?.['quality']?.status ?? 'not judged')).toEqual(['not judged', 'arrived', 'not judged']);
        const env = await AgentEnv.create(await defineEnv(manifest({ base_url: fake.url, provider: 'anthropic', model: 'claude-haiku-4-5', scope: 'episode' }), { dir }), { handlers: { ask: async () => ({ observation: 'ok' }) } });
        await using _b = env;
        const agent = env.createInstance();
        await agent.reset({ city: '北京' });
        const traces = [(await agent.step({ name: 'ask' })).info.trace_id, (await agent.step({ name: 'ask' })).info.trace_id];
        expect(env.rewards.entries(traces[1] as string)).toEqual({});
        await agent.terminate();
        await env.rewards.settle();
        expect(env.rewards.entries(traces[1] as string)?.['quality']).toMatchObject({ status: 'arrived', value: 0.3 });
        expect(env.rewards.entries(traces[0] as string)).toEqual({});
      },
    );
  });

  it('refuses to load without its API key (and without a local base URL), naming the variable', async () => {
    const err = await AgentEnv.create(await defineEnv(manifest({ provider: 'anthropic', model: 'claude-sonnet-4-5', api_key_env: 'AGENT_TEST_NO_SUCH_KEY' }), { dir }), { handlers: { ask: async () => ({ observation: null }) } }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'BAD_USAGE', message: expect.stringContaining('$AGENT_TEST_NO_SUCH_KEY') });
    const bad = await defineEnv(manifest({ provider: 'anthropic', model: 'm', prompt: 'nope.md', when: 'a ==' }), { dir }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ code: 'DEFINITION_INVALID', issues: expect.arrayContaining([expect.objectContaining({ pointer: '/reward_sources/quality/judge/prompt' }), expect.objectContaining({ pointer: '/reward_sources/quality/judge/when' })]) as unknown });
  });
});
