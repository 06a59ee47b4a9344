import { readFile } from 'node:fs/promises';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { AgentEnv } from '../env/agent-env.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import type { RunSummary } from '../run/run-summary.js';
import { serveEnv, type ServeOptions } from './serve.js';

interface Served {
  readonly url: string;
  readonly dir: string;
  stop(): Promise<RunSummary>;
}

const stops: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(stops.splice(0).map((s) => s()));
});

async function serve(env: string, options: Partial<ServeOptions> = {}): Promise<Served> {
  const controller = new AbortController();
  const out = await mkdtemp(path.join(tmpdir(), 'agent-serve-'));
  let ready!: (v: { url: string; dir: string }) => void;
  const listening = new Promise<{ url: string; dir: string }>((r) => (ready = r));
  const done = serveEnv({ env, listen: 0, out, onListening: ready, ...options }, controller.signal);
  const { url, dir } = await Promise.race([listening, done.then(() => Promise.reject(new Error('the server stopped before listening')))]);
  let summary: Promise<RunSummary> | undefined;
  const stop = (): Promise<RunSummary> => {
    controller.abort();
    return (summary ??= done);
  };
  stops.push(stop);
  return { url, dir, stop };
}

/** A WebSocket client as OpenEnv's: one request, then its reply. */
async function client(url: string, headers: Record<string, string> = {}): Promise<{ ask(message: object): Promise<{ type: string; data: JsonObject }>; close(): Promise<void> }> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`, { headers });
  const inbox: string[] = [];
  let waiter: ((m: string) => void) | undefined;
  ws.on('message', (m) => {
    const w = waiter;
    waiter = undefined;
    if (w) w(String(m));
    else inbox.push(String(m));
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return {
    ask: async (message) => {
      ws.send(JSON.stringify(message));
      const raw = inbox.shift() ?? (await new Promise<string>((r) => (waiter = r)));
      return JSON.parse(raw) as { type: string; data: JsonObject };
    },
    close: () => new Promise<void>((resolve) => (ws.readyState === ws.CLOSED ? resolve() : (ws.once('close', () => resolve()), ws.close()))),
  };
}

async function lines(file: string): Promise<JsonObject[]> {
  return (await readFile(file, 'utf8'))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as JsonObject);
}

describe('agent serve', () => {
  it("answers OpenEnv's messages in OpenEnv's shapes, the tool's output under observation.observation", async () => {
    const { url } = await serve('fixtures/weather');
    const c = await client(url);
    const reset = await c.ask({ type: 'reset', data: {} });
    expect(reset).toMatchObject({ type: 'observation', data: { observation: { observation: null, episode_id: 'ep-0', trace_id: null, step: 0 }, reward: null, done: false } });
    expect((reset.data['observation'] as JsonObject)['actions']).toEqual([{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }]);
    const step = await c.ask({ type: 'step', data: { name: 'get_weather', params: { city: 'Paris' } } });
    expect(step).toMatchObject({ type: 'observation', data: { observation: { observation: { city: 'Paris' }, trace_id: 'ep-0:1', step: 1 }, done: false, rewards: { api_latency: { status: 'arrived' }, llm_score: { status: 'pending' } } } });
    expect(Object.keys(step.data).slice(0, 3)).toEqual(['observation', 'reward', 'done']);
    expect(typeof step.data['reward']).toBe('number');
    expect(await c.ask({ type: 'state' })).toMatchObject({ type: 'state', data: { episode_id: 'ep-0', step_count: 1, seq: 1 } });
    expect(await c.ask({ type: 'step', data: { name: 'nope' } })).toMatchObject({ type: 'error', data: { code: 'ACTION_UNKNOWN', message: expect.stringContaining('nope') } });
    expect(await c.ask({ type: 'warp' })).toMatchObject({ type: 'error', data: { code: 'UNKNOWN_TYPE' } });
    await c.close();
  });

  it('runs τ-bench airline tasks by id: the final state after the gold actions equals the one the env reaches in process', async () => {
    const suite = 'fixtures/tau-bench/airline';
    const tasks = (await lines(path.join(suite, 'tasks', 'test.jsonl'))).slice(0, 4) as unknown as { id: string; instruction: string; actions: { name: string; params: JsonObject }[] }[];
    await using env = await AgentEnv.open(suite);
    const { url } = await serve('tau-bench/airline');
    for (const task of tasks) {
      const gold = env.createInstance({ id: `gold-${task.id}` });
      await gold.reset(env.definition.initialStates[0] as JsonValue);
      for (const a of task.actions) await gold.step(a, { signal: AbortSignal.timeout(30_000) });
      const c = await client(url);
      expect(await c.ask({ type: 'reset', data: { task_id: task.id } })).toMatchObject({ data: { observation: { task_id: task.id, instruction: task.instruction } } });
      for (const a of task.actions) expect(await c.ask({ type: 'step', data: a })).toMatchObject({ data: { info: { status: 'resolved' } } });
      const state = await c.ask({ type: 'state' });
      expect(state.data['state']).toEqual(gold.state);
      await c.close();
    }
    const bad = await client(url);
    expect(await bad.ask({ type: 'reset', data: { task_id: 'airline-test-999' } })).toMatchObject({ type: 'error', data: { code: 'PARAMS_INVALID', hint: expect.stringContaining('airline-test-0') } });
    await bad.close();
  });

  it('records every served episode in the run folder: a client that leaves truncates its episode; the step limit comes back done and truncated', async () => {
    const served = await serve('fixtures/weather', { maxSteps: 2 });
    const a = await client(served.url);
    await a.ask({ type: 'reset', data: {} });
    await a.ask({ type: 'step', data: { name: 'get_weather', params: { city: 'Paris' } } });
    await a.close();
    const b = await client(served.url);
    await b.ask({ type: 'reset', data: { episode_id: 'mine' } });
    await b.ask({ type: 'step', data: { name: 'get_weather', params: { city: 'Rome' } } });
    expect(await b.ask({ type: 'step', data: { name: 'get_weather', params: { city: 'Oslo' } } })).toMatchObject({ data: { done: true, truncated: true } });
    expect(await b.ask({ type: 'step', data: { name: 'get_weather', params: { city: 'Lima' } } })).toMatchObject({ type: 'error', data: { code: 'EPISODE_DONE' } });
    await b.close();
    // A socket's close reaches the server a moment after the client's close returns.
    while (((await (await fetch(`${served.url}/health`)).json()) as { sessions: number }).sessions > 0) await new Promise((r) => setTimeout(r, 10));
    const summary = await served.stop();
    expect(summary.episodes.by_reason).toEqual({ client_closed: 1, max_steps: 1 });
    const episodes = await lines(path.join(served.dir, 'episodes.jsonl'));
    expect(episodes.map((e) => [e['reason'], e['steps'], e['truncated']]).sort()).toEqual([['client_closed', 1, true], ['max_steps', 2, true]]);
    expect((await lines(path.join(served.dir, 'trajectories.jsonl'))).map((s) => s['action'])).toEqual(['get_weather', 'get_weather', 'get_weather']);
  });

  it('serves the stateless HTTP routes with sessions kept by episode id', async () => {
    const { url } = await serve('fixtures/weather');
    const post = async (route: string, body: object): Promise<{ status: number; body: JsonObject }> => {
      const res = await fetch(`${url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as JsonObject };
    };
    expect(await (await fetch(`${url}/health`)).json()).toMatchObject({ status: 'healthy', sessions: 0 });
    const reset = await post('/reset', { seed: 0 });
    const id = (reset.body['observation'] as JsonObject)['episode_id'] as string;
    const step = await post('/step', { episode_id: id, action: { name: 'get_weather', params: { city: 'Paris' } } });
    expect(step).toMatchObject({ status: 200, body: { observation: { observation: { city: 'Paris' } }, done: false } });
    expect(await (await fetch(`${url}/state?episode_id=${id}`)).json()).toMatchObject({ episode_id: id, step_count: 1 });
    expect(await post('/step', { action: { name: 'get_weather', params: { city: 'Paris' } } })).toMatchObject({ status: 400, body: { code: 'PARAMS_INVALID', error: 'episode_id is missing' } });
    expect(await post('/step', { episode_id: id, action: { name: 'get_weather', params: { city: 3 } } })).toMatchObject({ status: 400, body: { code: 'PARAMS_INVALID', pointer: '/city' } });
    expect(await post('/close', { episode_id: id })).toMatchObject({ status: 200, body: { closed: true } });
    expect(await post('/step', { episode_id: id, action: { name: 'get_weather', params: { city: 'Paris' } } })).toMatchObject({ status: 404, body: { code: 'EPISODE_UNKNOWN' } });
    expect(((await (await fetch(`${url}/schema`)).json()) as JsonObject)['action']).toMatchObject({ oneOf: [{ properties: { name: { const: 'get_weather' } } }] });
  });

  it('lets in only its owner: Host and Origin checked on the upgrade too, a token off loopback; sessions capped', async () => {
    const { url } = await serve('fixtures/weather', { maxSessions: 1 });
    await expect(client(url, { origin: 'https://evil.example' })).rejects.toThrow(/403/);
    await expect(client(url, { host: 'evil.example' })).rejects.toThrow(/403/);
    expect((await fetch(`${url}/reset`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' })).status).toBe(415);
    const first = await client(url);
    const second = await client(url);
    expect(await second.ask({ type: 'reset' })).toMatchObject({ type: 'error', data: { code: 'CAPACITY_REACHED' } });
    await Promise.all([first.close(), second.close()]);
    await expect(serve('fixtures/weather', { host: '0.0.0.0' })).rejects.toMatchObject({ code: 'BAD_USAGE', hint: expect.stringContaining('--token') });
    const guarded = await serve('fixtures/weather', { token: 'a-long-enough-secret-token' });
    await expect(client(guarded.url)).rejects.toThrow(/401/);
    const ok = await client(guarded.url, { authorization: 'Bearer a-long-enough-secret-token' });
    expect(await ok.ask({ type: 'reset' })).toMatchObject({ type: 'observation' });
    await ok.close();
  });
});
