import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AgentEnv, defineEnv, ToolError, type EnvEvent, type EnvManifest, type StepResult, type ToolHandler } from '../index.js';

const open: AsyncDisposable[] = [];
afterEach(async () => {
  for (const r of open.splice(0).reverse()) await r[Symbol.asyncDispose]();
});

async function envWith(manifest: Partial<EnvManifest>, handlers: Record<string, ToolHandler> = {}): Promise<{ env: AgentEnv; events: EnvEvent[] }> {
  const names = Object.keys(manifest.tools ?? handlers);
  const def = await defineEnv({ state: { type: 'object' }, actions: names.map((name) => ({ name, parameters: { type: 'object' } })), ...manifest });
  const env = await AgentEnv.create(def, { handlers });
  open.push(env);
  const events: EnvEvent[] = [];
  env.events.onAny((e) => events.push(e));
  return { env, events };
}

async function callOnce(env: AgentEnv, name: string, params = {}): Promise<StepResult> {
  const agent = env.createInstance();
  await agent.reset({});
  return agent.step({ name, params });
}

describe('adapters', () => {
  it('runs Python subprocess tools and a JavaScript module (fixtures/polyglot)', async () => {
    const env = await AgentEnv.open('fixtures/polyglot');
    open.push(env);
    const agent = env.createInstance();
    await agent.reset(env.definition.initialStates[0] ?? null);
    expect(agent.availableActions().map((a) => a.name)).toEqual(['word_count', 'flaky_lookup', 'shout', 'serve_info']);
    expect((await agent.step({ name: 'word_count' })).observation).toEqual({ words: 5 });
    const slug = await agent.step({ name: 'slugify', params: { text: 'A Native Runtime!' } });
    expect(slug.state).toMatchObject({ words: 5, slug: 'a-native-runtime' });
    expect((await agent.step({ name: 'shout' })).state).toMatchObject({ text: 'AGENTS NEED A NATIVE RUNTIME' });
    // Retryable failures are retried: two failures, then success on attempt 3.
    const flaky = await agent.step({ name: 'flaky_lookup', params: { fail_times: 2 } });
    expect(flaky.info).toMatchObject({ status: 'resolved', attempts: 3 });
    expect(flaky.observation).toEqual({ source: 'upstream', attempt: 3 });
    // Past max_attempts the declared fallback answers, and says so.
    const fallback = await agent.step({ name: 'flaky_lookup', params: { fail_times: 5 } });
    expect(fallback.info).toMatchObject({ status: 'resolved', attempts: 3, fallback: 'observation' });
    expect(fallback.observation).toEqual({ source: 'fallback', value: null });
  });

  it('keeps persistent Python processes, and replaces one that crashes, garbles or stalls', async () => {
    const env = await AgentEnv.open('fixtures/polyglot');
    open.push(env);
    const agent = env.createInstance();
    await agent.reset(env.definition.initialStates[0] ?? null);
    const info = async (params = {}): Promise<{ pid: number; served: number }> => (await agent.step({ name: 'serve_info', params })).observation as { pid: number; served: number };
    const first = await info();
    expect(await info()).toEqual({ pid: first.pid, served: first.served + 1 });
    // Two calls at once get two processes (pool of 2).
    const [a, b] = await Promise.all([agent.step({ name: 'serve_info', params: { sleep_ms: 50 } }), agent.step({ name: 'serve_info', params: { sleep_ms: 50 } })]);
    expect(new Set([(a.observation as { pid: number }).pid, (b.observation as { pid: number }).pid]).size).toBe(2);
    for (const [params, code] of [
      [{ crash: true }, 'TOOL_CRASHED'],
      [{ garble: true }, 'TOOL_MALFORMED_OUTPUT'],
      [{ sleep_ms: 3000 }, 'TOOL_TIMEOUT'],
    ] as const) {
      const r = await agent.step({ name: 'serve_info', params });
      expect(r.info.error?.code).toBe(code);
      // The next call is served: by a fresh process where the old one was killed.
      expect((await info()).served).toBeGreaterThanOrEqual(1);
    }
    const crash = await agent.step({ name: 'serve_info', params: { crash: true } });
    expect(crash.info.error?.message).toMatch(/exited with code 3: crashing on request/);
  });

  it("hands a traced call's traceparent to every kind of tool: in process, as TRACEPARENT and in the request of a subprocess, in a pooled process's request", async () => {
    const echo = 'import json, os, sys; r = json.load(sys.stdin); print(json.dumps({"observation": [os.environ.get("TRACEPARENT"), r.get("traceparent")]}))';
    const pooled = 'import json, sys\nfor line in sys.stdin:\n    r = json.loads(line)\n    print(json.dumps({"observation": [None, r.get("traceparent")]}), flush=True)';
    const def = await defineEnv({
      state: { type: 'object' },
      actions: ['once', 'pool', 'inproc'].map((name) => ({ name, parameters: { type: 'object' } })),
      tools: { once: { command: ['python3', '-c', echo] }, pool: { command: ['python3', '-c', pooled], persistent: true } },
    });
    const traceparent = (traceId: string): string => `00-${'1'.repeat(32)}-${Buffer.from(traceId).toString('hex').padEnd(16, '0').slice(0, 16)}-01`;
    const env = await AgentEnv.create(def, { traceparent, handlers: { inproc: (_p, ctx) => ({ observation: [null, ctx.traceparent ?? null] }) } });
    open.push(env);
    const agent = env.createInstance();
    await agent.reset({});
    for (const name of ['once', 'pool', 'inproc']) {
      const r = await agent.step({ name });
      const expected = traceparent(r.info.trace_id);
      expect(r.observation).toEqual([name === 'once' ? expected : null, expected]);
    }
  });

  it('reports malformed output, a crash and a missing program as typed failures of that trace only', async () => {
    const script = (body: string): string[] => ['python3', '-c', body];
    const { env } = await envWith({
      tools: {
        garbage: { command: script('print("this is not json")') },
        crash: { command: script('import sys; sys.stderr.write("Traceback: KeyError city\\n"); sys.exit(3)') },
        tempfail: { command: script('import sys; sys.exit(75)'), retry: { max_attempts: 2, initial_delay_ms: 1 } },
        missing: { command: ['definitely-not-a-program-xyz'] },
        fine: { command: script('print("{\\"observation\\": 1}")') },
      },
    });
    const agent = env.createInstance();
    await agent.reset({});
    const ids = ['garbage', 'crash', 'tempfail', 'missing', 'fine'].map((name) => agent.dispatch({ name }));
    const r = await Promise.all(ids.map((id) => agent.resolve(id)));
    expect(r.map((x) => x.info.error?.code ?? x.info.status)).toEqual(['TOOL_MALFORMED_OUTPUT', 'TOOL_CRASHED', 'TOOL_FAILED', 'TOOL_FAILED', 'resolved']);
    expect(r[0]?.info.error?.message).toContain('this is not json');
    expect(r[1]?.info.error?.message).toMatch(/exited with code 3.*KeyError city/s);
    expect(r[2]?.info.attempts).toBe(2);
    expect(r[3]?.info.error?.message).toContain('cannot start');
  });

  describe('HTTP', () => {
    let server: Server;
    let hits: Record<string, number>;
    const start = async (): Promise<string> => {
      hits = {};
      server = createServer((req, res) => {
        let body = '';
        req.on('data', (c: Buffer) => (body += c.toString()));
        req.on('end', () => {
          const { tool, params } = JSON.parse(body) as { tool: string; params: { q?: string } };
          hits[tool] = (hits[tool] ?? 0) + 1;
          const reply = (status: number, text: string): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(text);
          if (tool === 'search') reply(200, JSON.stringify({ observation: { results: [`${params.q} result`] } }));
          else if (tool === 'unstable') reply(hits[tool] === 1 ? 503 : 200, hits[tool] === 1 ? 'busy' : JSON.stringify({ observation: 'ok' }));
          else if (tool === 'bad_request') reply(400, '{"error":"no"}');
          else reply(200, '{"observation": ');
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      open.push({ [Symbol.asyncDispose]: () => new Promise<void>((r) => server.close(() => r())) });
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/tool`;
    };

    it('POSTs JSON, retries 5xx, does not retry 4xx, and flags malformed bodies', async () => {
      const url = await start();
      const retry = { max_attempts: 3, initial_delay_ms: 1, max_delay_ms: 2 };
      const { env } = await envWith({ tools: { search: { url }, unstable: { url, retry }, bad_request: { url, retry }, truncated: { url } } });
      const agent = env.createInstance();
      await agent.reset({});
      expect((await agent.step({ name: 'search', params: { q: 'tokyo' } })).observation).toEqual({ results: ['tokyo result'] });
      expect((await agent.step({ name: 'unstable' })).info).toMatchObject({ status: 'resolved', attempts: 2 });
      const bad = await agent.step({ name: 'bad_request' });
      expect(bad.info).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'TOOL_FAILED' } });
      expect(hits['bad_request']).toBe(1);
      expect((await agent.step({ name: 'truncated' })).info.error?.code).toBe('TOOL_MALFORMED_OUTPUT');
    });
  });
});

describe('policies', () => {
  it('times out a hanging tool, aborting its signal', async () => {
    let aborted = false;
    const { env } = await envWith({ tools: { hang: { timeout_ms: 20 } } }, {
      hang: (_p, ctx) => {
        ctx.signal.addEventListener('abort', () => (aborted = true));
        return new Promise(() => {});
      },
    });
    const r = await callOnce(env, 'hang');
    expect(r.info.error).toMatchObject({ code: 'TOOL_TIMEOUT', tool: 'hang' });
    expect(aborted).toBe(true);
  });

  it('retries retryable errors only', async () => {
    let calls = { transient: 0, permanent: 0 };
    const retry = { max_attempts: 4, initial_delay_ms: 1, max_delay_ms: 2 };
    const { env } = await envWith({ tools: { transient: { retry }, permanent: { retry } } }, {
      transient: async () => {
        calls.transient++;
        if (calls.transient < 3) throw new ToolError('TOOL_FAILED', 'transient', 'rate limited', { retryable: true });
        return { observation: calls.transient };
      },
      permanent: async () => {
        calls.permanent++;
        throw new ToolError('TOOL_FAILED', 'permanent', 'invalid card');
      },
    });
    expect((await callOnce(env, 'transient')).info).toMatchObject({ status: 'resolved', attempts: 3 });
    expect((await callOnce(env, 'permanent')).info).toMatchObject({ status: 'failed', attempts: 1 });
    expect(calls).toEqual({ transient: 3, permanent: 1 });
    calls = { transient: 0, permanent: 0 };
  });

  it('opens the circuit after K consecutive failures and stops calling the tool', async () => {
    let calls = 0;
    const { env } = await envWith({ tools: { down: { circuit_breaker: { failures: 2, half_open_after_ms: 60_000 } } } }, {
      down: async () => {
        calls++;
        throw new ToolError('TOOL_FAILED', 'down', '503');
      },
    });
    const agent = env.createInstance();
    await agent.reset({});
    const codes = [];
    for (let i = 0; i < 4; i++) codes.push((await agent.step({ name: 'down' })).info.error?.code);
    expect(codes).toEqual(['TOOL_FAILED', 'TOOL_FAILED', 'TOOL_CIRCUIT_OPEN', 'TOOL_CIRCUIT_OPEN']);
    expect(calls).toBe(2);
  });

  it('limits concurrency per tool (bulkhead)', async () => {
    let running = 0;
    let peak = 0;
    const { env } = await envWith({ tools: { pooled: { concurrency: 2 } } }, {
      pooled: async () => {
        running++;
        peak = Math.max(peak, running);
        await new Promise((r) => setTimeout(r, 5));
        running--;
        return {};
      },
    });
    const agent = env.createInstance();
    await agent.reset({});
    const ids = Array.from({ length: 8 }, () => agent.dispatch({ name: 'pooled' }));
    const results = await Promise.all(ids.map((id) => agent.resolve(id)));
    expect(results.every((r) => r.info.status === 'resolved')).toBe(true);
    expect(peak).toBe(2);
  });

  it('falls back to another action', async () => {
    const { env } = await envWith({ tools: { primary: { fallback: { action: 'backup' } }, backup: {} } }, {
      primary: async () => {
        throw new ToolError('TOOL_FAILED', 'primary', 'down');
      },
      backup: async () => ({ observation: 'from backup' }),
    });
    const r = await callOnce(env, 'primary');
    expect(r.info).toMatchObject({ status: 'resolved', fallback: 'backup', attempts: 2 });
    expect(r.observation).toBe('from backup');
  });
});

describe('event-loop protection (fixtures/cpu)', () => {
  it('names a tool that blocks the loop, and a worker-isolated one no longer stalls the others', async () => {
    const env = await AgentEnv.open('fixtures/cpu', { blockThresholdMs: 50 });
    open.push(env);
    const events: EnvEvent[] = [];
    env.events.onAny((e) => events.push(e));
    const agent = env.createInstance();
    await agent.reset({});

    // In the loop: the call is reported, and a ping dispatched alongside cannot finish first.
    const order: string[] = [];
    const inline = agent.dispatch({ name: 'crunch_inline', params: { ms: 150 } });
    const ping1 = agent.dispatch({ name: 'ping' });
    await Promise.all([agent.resolve(inline).then(() => order.push('crunch')), agent.resolve(ping1).then(() => order.push('ping'))]);
    expect(order).toEqual(['crunch', 'ping']);
    const blocked = events.filter((e) => e.type === 'loop_blocked');
    expect(blocked).toHaveLength(1);
    expect(blocked[0]).toMatchObject({ tool: 'crunch_inline', trace_id: inline });
    expect((blocked[0] as { blocked_ms: number }).blocked_ms).toBeGreaterThanOrEqual(50);

    // In a worker: no block, and pings overtake the crunch.
    order.length = 0;
    events.length = 0;
    // warm the worker (module load) so the comparison is about the work, not start-up
    expect((await agent.step({ name: 'crunch_worker', params: { ms: 0 } })).info.status).toBe('resolved');
    const isolated = agent.dispatch({ name: 'crunch_worker', params: { ms: 400 } });
    const pings = Array.from({ length: 5 }, () => agent.dispatch({ name: 'ping' }));
    const [crunched] = await Promise.all([
      agent.resolve(isolated).then((r) => (order.push('crunch'), r)),
      ...pings.map((p) => agent.resolve(p).then(() => order.push('ping'))),
    ]);
    expect(crunched.info.status).toBe('resolved');
    expect(crunched.observation).toEqual({ spins: true });
    expect(order).toEqual(['ping', 'ping', 'ping', 'ping', 'ping', 'crunch']);
    expect(events.filter((e) => e.type === 'loop_blocked')).toEqual([]);
  });

  it('reports lag from blocking after an await, with the calls in flight, when the env watches the loop', async () => {
    const env = await AgentEnv.open('fixtures/cpu', { blockThresholdMs: 50, watchEventLoop: true });
    open.push(env);
    const events: EnvEvent[] = [];
    env.events.onAny((e) => events.push(e));
    const agent = env.createInstance();
    await agent.reset({});
    const id = agent.dispatch({ name: 'crunch_after_await', params: { ms: 200 } });
    expect((await agent.resolve(id)).info.status).toBe('resolved');
    // The monitor's tick comes due only after the block; wait for it on the loop, not on a clock.
    await vi.waitFor(() => expect(events.some((e) => e.type === 'loop_lag')).toBe(true));
    expect(events.filter((e) => e.type === 'loop_blocked')).toEqual([]);
    const lag = events.find((e) => e.type === 'loop_lag');
    expect(lag).toMatchObject({ in_flight: [{ trace_id: id, tool: 'crunch_after_await' }] });
    expect((lag as { lag_ms: number }).lag_ms).toBeGreaterThanOrEqual(50);
  });

  it('times out a CPU-bound worker call by terminating its worker', async () => {
    const def = await defineEnv(
      {
        state: { type: 'object' },
        actions: [{ name: 'crunch', parameters: { type: 'object', properties: { ms: { type: 'integer' } } } }],
        module: 'tools.ts',
        tools: { crunch: { isolate: 'worker', timeout_ms: 1_000, concurrency: 1 } },
      },
      { dir: 'fixtures/cpu' },
    );
    const env = await AgentEnv.create(def);
    open.push(env);
    const r = await callOnce(env, 'crunch', { ms: 5_000 });
    expect(r.info.error?.code).toBe('TOOL_TIMEOUT');
    // the pool replaces the terminated worker
    const agent = env.createInstance();
    await agent.reset({});
    const again = await agent.step({ name: 'crunch', params: { ms: 1 } });
    expect(again.info.error).toBeUndefined();
    expect(again.info.status).toBe('resolved');
  });
});
