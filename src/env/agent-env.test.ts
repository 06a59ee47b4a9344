import { afterEach, describe, expect, it, vi } from 'vitest';
import { AgentEnv, defineEnv, isAgentError, ValidationError, type EnvEvent, type ToolHandler } from '../index.js';

const open: AgentEnv[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const env of open.splice(0)) await env[Symbol.asyncDispose]();
});

async function weather(): Promise<AgentEnv> {
  const env = await AgentEnv.open('fixtures/weather', { toolOptions: { latency_scale: 0 }, seed: 7 });
  open.push(env);
  return env;
}

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** An env whose tools are controlled by the test. */
async function controlled(handlers: Record<string, ToolHandler>, extra: { rewards?: Record<string, unknown> } = {}): Promise<{ env: AgentEnv; events: EnvEvent[] }> {
  const def = await defineEnv({
    state: {
      type: 'object',
      properties: { n: { type: 'integer', minimum: 0 }, log: { type: 'array', items: { type: 'string' } }, ready: { type: 'boolean' } },
      required: ['n', 'log'],
    },
    actions: Object.keys(handlers).map((name) => ({ name, parameters: { type: 'object', properties: { tag: { type: 'string' } } }, ...(name === 'gated' ? { enabled_if: 'ready' } : {}) })),
    rewards: extra.rewards ?? { type: 'object', properties: { quality: { type: 'number', minimum: 0, maximum: 1 }, judge: { type: 'number', delay_ms: 200 } } },
  });
  const env = await AgentEnv.create(def, { handlers });
  open.push(env);
  const events: EnvEvent[] = [];
  env.events.onAny((e) => events.push(e));
  return { env, events };
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return isAgentError(err) ? err.code : String(err);
  }
  return undefined;
}

describe('the article flow on fixtures/weather', () => {
  it('reset, dispatch (a trace id at once), resolve → state, reward, done, info.trace_id', async () => {
    const env = await weather();
    const events: EnvEvent[] = [];
    env.events.onAny((e) => events.push(e));
    const agent = env.createInstance();
    await agent.reset({ user_location: '上海' });
    expect(agent.availableActions().map((a) => a.name)).toEqual(['get_weather']);

    const traceId = agent.dispatch({ name: 'get_weather', params: { city: '上海' } });
    expect(typeof traceId).toBe('string');
    // dispatch returned before the tool finished
    expect(events.some((e) => e.type === 'tool_finished')).toBe(false);
    expect(agent.pending().map((p) => p.traceId)).toEqual([traceId]);

    const result = await agent.resolve(traceId, { timeoutMs: 5_000 });
    expect(result.info.trace_id).toBe(traceId);
    expect(result.info.status).toBe('resolved');
    expect(result.done).toBe(false);
    expect(result.state).toMatchObject({ user_location: '上海', current_weather: { temperature: expect.any(Number), condition: expect.any(String) } });
    expect(result.rewards['api_latency']).toEqual({ status: 'arrived', value: expect.any(Number), arrived_at: expect.any(Number), delay_ms: 0 });
    // llm_score comes from the env's judge module, off the step's critical path: pending when the step settles, expected after its declared delay.
    const stepAt = events.find((e) => e.type === 'reward_arrived')?.time as number; // the tool's own reward lands at the step's time
    expect(result.rewards['llm_score']).toEqual({ status: 'pending', value: null, arrived_at: null, delay_ms: null, expected_at: stepAt + 200 });
    // The step's reward so far is its latency as a cost (weight −0.001 per ms); the judge's score adds to it when it lands.
    expect(result.reward).toBeCloseTo(-0.001 * (result.rewards['api_latency']?.value as number), 9);
    expect(events.map((e) => e.type)).toEqual([
      'lifecycle_changed',
      'lifecycle_changed',
      'dispatched',
      'tool_started',
      'tool_finished',
      'state_committed',
      'reward_arrived',
      'trace_settled',
    ]);
    expect((await agent.stateAt({ seq: 0 })).state).toEqual({ user_location: '上海' });
    expect((await agent.stateAt({ seq: 1 })).state).toEqual(result.state);
    // Then it lands on its step: the user's own city, and a weather report (0.6 + 0.2).
    await env.rewards.settle();
    expect(env.rewards.entries(traceId)?.['llm_score']).toMatchObject({ status: 'arrived', value: 0.8 });
    expect(env.rewards.reward(traceId)).toBeCloseTo((result.reward) + 0.8);
    expect(events.slice(-1)).toMatchObject([{ type: 'reward_arrived', trace_id: traceId, source: 'llm_score', value: 0.8, episode: 1, step: 1 }]);
  });

  it('replays the same trajectory for the same seed', async () => {
    const run = async (): Promise<unknown[]> => {
      const env = await weather();
      const agent = env.createInstance();
      await agent.reset({ user_location: '北京', pending_requests: ['q1', 'q2'] });
      const out: unknown[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await agent.step({ name: 'get_weather', params: { city: '北京' } });
        out.push([r.state, Object.entries(r.rewards).map(([k, e]) => [k, e.status, e.value])]);
      }
      return out;
    };
    expect(await run()).toEqual(await run());
  });

  it('refuses a disabled action and invalid params with typed errors, writing nothing', async () => {
    const env = await weather();
    const events: EnvEvent[] = [];
    const agent = env.createInstance();
    await agent.reset({});
    env.events.onAny((e) => events.push(e));
    expect(agent.availableActions()).toEqual([]);
    expect(codeOf(() => agent.dispatch({ name: 'get_weather', params: { city: '上海' } }))).toBe('ACTION_DISABLED');

    await agent.reset({ user_location: '上海' });
    events.length = 0;
    let err: unknown;
    try {
      agent.dispatch({ name: 'get_weather', params: { city: 5 } });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).code).toBe('PARAMS_INVALID');
    expect((err as ValidationError).issues[0]?.pointer).toBe('/city');
    try {
      agent.dispatch({ name: 'get_weather', params: {} });
    } catch (e) {
      expect((e as ValidationError).issues[0]).toMatchObject({ pointer: '/city', message: 'is required but missing' });
    }
    expect(codeOf(() => agent.dispatch({ name: 'get_forecast' }))).toBe('ACTION_UNKNOWN');
    expect(events).toEqual([]);
    expect((await env.store.bounds(agent.id))?.headSeq).toBe(1);
  });

  it('refuses an invalid initial state', async () => {
    const env = await weather();
    const agent = env.createInstance();
    await expect(agent.reset({ user_location: 42 })).rejects.toMatchObject({ code: 'STATE_INVALID', issues: [{ pointer: '/user_location' }] });
    expect(agent.status).toBe('created');
  });
});

describe('dispatch / resolve', () => {
  it('keeps every call of overlapping ones findable by id, pending oldest first, each handed out once', async () => {
    const gates = new Map<string, ReturnType<typeof deferred<undefined>>>();
    const { env } = await controlled({
      held: async (p) => {
        const gate = deferred<undefined>();
        gates.set(p['tag'] as string, gate);
        await gate.promise;
        return { observation: p['tag'] as string };
      },
    });
    const agent = env.createInstance();
    await agent.reset({ n: 0, log: [] });
    const open = (tag: string): string => agent.dispatch({ name: 'held', params: { tag } });
    const release = async (tag: string, id: string): Promise<void> => {
      await vi.waitFor(() => expect(gates.has(tag)).toBe(true));
      gates.get(tag)?.resolve(undefined);
      expect((await agent.resolve(id)).observation).toBe(tag);
      await expect(agent.resolve(id)).rejects.toMatchObject({ code: 'TRACE_UNKNOWN' });
    };
    const a = open('a');
    const b = open('b');
    const c = open('c');
    expect(agent.pending().map((p) => p.traceId)).toEqual([a, b, c]);
    // The oldest goes first, then one in the middle; a call dispatched meanwhile comes last.
    await release('a', a);
    const d = open('d');
    await release('c', c);
    expect(agent.pending().map((p) => p.traceId)).toEqual([b, d]);
    await release('d', d);
    await release('b', b);
    expect(agent.pending()).toEqual([]);
    // One call at a time again, after overlapping ones.
    const e = open('e');
    expect(agent.pending().map((p) => p.traceId)).toEqual([e]);
    await release('e', e);
    const f = open('f');
    const g = open('g');
    await agent.terminate('done');
    await expect(agent.resolve(f)).resolves.toMatchObject({ info: { status: 'failed', error: { code: 'TOOL_CANCELLED' } } });
    await expect(agent.resolve(g)).resolves.toMatchObject({ info: { status: 'failed', error: { code: 'TOOL_CANCELLED' } } });
  });

  it('returns a partial result on timeout while the call goes on, then the final one', async () => {
    vi.useFakeTimers();
    const gate = deferred<undefined>();
    const { env } = await controlled({
      slow: async (_p, ctx) => {
        await gate.promise;
        return { observation: 'done', patch: [{ op: 'replace', path: '/n', value: (ctx.state as { n: number }).n + 1 }], rewards: { quality: 0.5 } };
      },
    });
    const agent = env.createInstance();
    await agent.reset({ n: 0, log: [] });
    const id = agent.dispatch({ name: 'slow' });
    const partial = agent.resolve(id, { timeoutMs: 100 });
    await vi.advanceTimersByTimeAsync(100);
    const p = await partial;
    expect(p.info.status).toBe('timeout');
    expect(p.state).toEqual({ n: 0, log: [] });
    // Not settled: nothing is owed to it yet.
    expect(p.rewards).toEqual({});
    expect(agent.pending()).toHaveLength(1);

    gate.resolve(undefined);
    const final = await agent.resolve(id, { timeoutMs: 100 });
    expect(final.info.status).toBe('resolved');
    expect(final.state).toEqual({ n: 1, log: [] });
    expect(final.reward).toBe(0.5);
    expect(agent.pending()).toHaveLength(0);
    await expect(agent.resolve(id)).rejects.toMatchObject({ code: 'TRACE_UNKNOWN' });
  });

  it('commits concurrent calls in completion order, each against the then-current state', async () => {
    const gates = { a: deferred<undefined>(), b: deferred<undefined>() };
    const append = (tag: 'a' | 'b'): ToolHandler => async () => {
      await gates[tag].promise;
      return { patch: [{ op: 'add', path: '/log/-', value: tag }] };
    };
    const { env, events } = await controlled({ a: append('a'), b: append('b') });
    const agent = env.createInstance();
    await agent.reset({ n: 0, log: [] });
    const ta = agent.dispatch({ name: 'a' });
    const tb = agent.dispatch({ name: 'b' });
    gates.b.resolve(undefined);
    const rb = await agent.resolve(tb);
    gates.a.resolve(undefined);
    const ra = await agent.resolve(ta);
    expect(rb.info.seq).toBe(1);
    expect(ra.info.seq).toBe(2);
    expect(ra.state).toEqual({ n: 0, log: ['b', 'a'] });
    expect((await agent.stateAt({ seq: 1 })).state).toEqual({ n: 0, log: ['b'] });
    expect(events.filter((e) => e.type === 'state_committed').map((e) => (e as { trace_id: string }).trace_id)).toEqual([tb, ta]);
  });

  it('fails only the trace whose patch would make the state invalid', async () => {
    const { env } = await controlled({
      bad: async () => ({ patch: [{ op: 'replace', path: '/n', value: -1 }] }),
      good: async () => ({ patch: [{ op: 'replace', path: '/n', value: 5 }] }),
    });
    const agent = env.createInstance();
    await agent.reset({ n: 0, log: [] });
    const [bad, good] = [agent.dispatch({ name: 'bad' }), agent.dispatch({ name: 'good' })];
    const rb = await agent.resolve(bad);
    const rg = await agent.resolve(good);
    expect(rb.info.status).toBe('failed');
    expect(rb.info.error).toMatchObject({ code: 'STATE_INVALID' });
    expect(rb.info.error?.message).toContain('/n');
    expect(rg.info.status).toBe('resolved');
    expect(agent.state).toEqual({ n: 5, log: [] });
    expect((await env.store.bounds(agent.id))?.headSeq).toBe(1);
  });

  it('fails only the trace of a throwing, malformed or reward-violating tool', async () => {
    const { env } = await controlled({
      crash: async () => {
        throw new Error('boom');
      },
      malformed: async () => ({ observation: 1, extra: true }) as never,
      undeclared: async () => ({ rewards: { made_up: 1 }, patch: [{ op: 'replace', path: '/n', value: 9 }] }),
      range: async () => ({ rewards: { quality: 2 } }),
      ok: async () => ({ observation: 'fine' }),
    });
    const agent = env.createInstance();
    await agent.reset({ n: 0, log: [] });
    const ids = ['crash', 'malformed', 'undeclared', 'range', 'ok'].map((name) => agent.dispatch({ name }));
    const results = await Promise.all(ids.map((id) => agent.resolve(id)));
    expect(results.map((r) => [r.info.status, r.info.error?.code])).toEqual([
      ['failed', 'TOOL_CRASHED'],
      ['failed', 'TOOL_CONTRACT'],
      ['failed', 'TOOL_CONTRACT'],
      ['failed', 'TOOL_CONTRACT'],
      ['resolved', undefined],
    ]);
    expect(results[0]?.info.error).toMatchObject({ tool: 'crash' });
    expect(results[0]?.info.error?.message).toContain('boom');
    expect(agent.state).toEqual({ n: 0, log: [] });
  });

  it('ends the episode on done and refuses further dispatches until reset', async () => {
    const { env } = await controlled({ finish: async () => ({ done: true }) });
    const agent = env.createInstance();
    await agent.reset({ n: 0, log: [] });
    expect((await agent.step({ name: 'finish' })).done).toBe(true);
    expect(codeOf(() => agent.dispatch({ name: 'finish' }))).toBe('EPISODE_DONE');
    await agent.reset({ n: 1, log: [] });
    expect(agent.episode).toBe(2);
    expect(codeOf(() => agent.dispatch({ name: 'finish' }))).toBeUndefined();
  });

  it('evaluates enabled_if on the current state', async () => {
    const { env } = await controlled({ gated: async () => ({}), other: async () => ({ patch: [{ op: 'add', path: '/ready', value: true }] }) });
    const agent = env.createInstance();
    await agent.reset({ n: 0, log: [] });
    expect(agent.availableActions().map((a) => a.name)).toEqual(['other']);
    await agent.step({ name: 'other' });
    expect(agent.availableActions().map((a) => a.name)).toEqual(['gated', 'other']);
  });
});

describe('lifecycle', () => {
  it('walks created → initialized → running → paused → running → terminated → archived, with hooks', async () => {
    const seen: string[] = [];
    const gate = deferred<undefined>();
    const started = deferred<undefined>();
    let aborted = false;
    const { env } = await controlled({
      wait: async (_p, ctx) => {
        ctx.signal.addEventListener('abort', () => (aborted = true));
        started.resolve(undefined);
        await Promise.race([gate.promise, new Promise((_r, rej) => ctx.signal.addEventListener('abort', () => rej(ctx.signal.reason)))]);
        return {};
      },
      quick: async () => ({ patch: [{ op: 'replace', path: '/n', value: 1 }], rewards: { quality: 1 } }),
    });
    const agent = env.createInstance({
      id: 'a1',
      hooks: {
        onLifecycle: (e) => seen.push(`${e.from}→${e.to}`),
        onToolCallStart: (e) => seen.push(`start ${e.tool}`),
        onToolCallEnd: (e) => seen.push(`end ${e.tool} ${e.ok}`),
        onStateChange: (e) => seen.push(`state ${e.seq}`),
        onRewardReceived: (e) => seen.push(`reward ${e.source}=${e.value}`),
      },
    });
    expect(agent.status).toBe('created');
    expect(codeOf(() => agent.dispatch({ name: 'quick' }))).toBe('ILLEGAL_TRANSITION');
    await agent.reset({ n: 0, log: [] });
    await agent.step({ name: 'quick' });
    agent.pause();
    expect(codeOf(() => agent.dispatch({ name: 'quick' }))).toBe('ILLEGAL_TRANSITION');
    agent.resume();
    const id = agent.dispatch({ name: 'wait' });
    await started.promise;
    await agent.terminate('test over');
    expect(aborted).toBe(true);
    const r = await agent.resolve(id);
    expect(r.info.error?.code).toBe('TOOL_CANCELLED');
    expect(codeOf(() => agent.resume())).toBe('ILLEGAL_TRANSITION');
    agent.archive();
    await expect(agent.reset({ n: 0, log: [] })).rejects.toMatchObject({ code: 'ILLEGAL_TRANSITION' });
    expect(seen).toEqual([
      'created→initialized',
      'initialized→running',
      'start quick',
      'end quick true',
      'state 1',
      'reward quality=1',
      'running→paused',
      'paused→running',
      'start wait',
      'running→terminated',
      'end wait false',
      'terminated→archived',
    ]);
    // history stays readable after archive
    expect((await agent.stateAt({ seq: 1 })).state).toEqual({ n: 1, log: [] });
  });

  it('reports a throwing hook as an error event without breaking the core', async () => {
    const { env, events } = await controlled({ quick: async () => ({}) });
    const agent = env.createInstance({ hooks: { onToolCallStart: () => { throw new Error('hook bug'); } } });
    await agent.reset({ n: 0, log: [] });
    expect((await agent.step({ name: 'quick' })).info.status).toBe('resolved');
    expect(events.find((e) => e.type === 'error')).toMatchObject({ error: { message: expect.stringContaining('hook bug') } });
  });

  it('runs many instances with many calls in flight in one process', async () => {
    const { env } = await controlled({ inc: async () => { await new Promise((r) => setImmediate(r)); return { patch: [{ op: 'add', path: '/log/-', value: 'x' }] }; } });
    const agents = Array.from({ length: 50 }, () => env.createInstance());
    await Promise.all(agents.map((a) => a.reset({ n: 0, log: [] })));
    const ids = agents.flatMap((a) => Array.from({ length: 20 }, () => [a, a.dispatch({ name: 'inc' })] as const));
    const results = await Promise.all(ids.map(([a, id]) => a.resolve(id)));
    expect(results.every((r) => r.info.status === 'resolved')).toBe(true);
    expect(agents.every((a) => (a.state as { log: string[] }).log.length === 20 && a.seq === 20)).toBe(true);
  });
});
