import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
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
async function client(url: string, headers: Record<string, string> = {}): Promise<{ ask(message: object): Promise<{ type: string; data: JsonObject }>; askRaw(text: string): Promise<{ type: string; data: JsonObject }>; close(): Promise<void> }> {
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
  const askRaw = async (text: string): Promise<{ type: string; data: JsonObject }> => {
    ws.send(text);
    // A reply that never comes fails the test within a minute instead of hanging it.
    const raw =
      inbox.shift() ??
      (await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no reply in 60 s to ${text.slice(0, 200)}`)), 60_000);
        waiter = (m) => {
          clearTimeout(timer);
          resolve(m);
        };
      }));
    return JSON.parse(raw) as { type: string; data: JsonObject };
  };
  return {
    ask: (message) => askRaw(JSON.stringify(message)),
    askRaw,
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
    expect(reset).toMatchObject({ type: 'observation', data: { observation: { observation: null, episode_id: expect.stringMatching(/^ep-[0-9a-f]{32}$/), trace_id: null, step: 0 }, reward: null, done: false } });
    expect((reset.data['observation'] as JsonObject)['actions']).toEqual([{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }]);
    const step = await c.ask({ type: 'step', data: { name: 'get_weather', params: { city: 'Paris' } } });
    expect(step).toMatchObject({ type: 'observation', data: { observation: { observation: { city: 'Paris' }, trace_id: 'ep-0:1', step: 1 }, done: false, rewards: { api_latency: { status: 'arrived' }, llm_score: { status: 'pending' } } } });
    expect(Object.keys(step.data).slice(0, 3)).toEqual(['observation', 'reward', 'done']);
    expect(typeof step.data['reward']).toBe('number');
    expect(await c.ask({ type: 'state' })).toMatchObject({ type: 'state', data: { episode_id: (reset.data['observation'] as JsonObject)['episode_id'], step_count: 1, seq: 1 } });
    expect(await c.ask({ type: 'step', data: { name: 'nope' } })).toMatchObject({ type: 'error', data: { code: 'ACTION_UNKNOWN', message: expect.stringContaining('nope') } });
    expect(await c.ask({ type: 'warp' })).toMatchObject({ type: 'error', data: { code: 'UNKNOWN_TYPE' } });
    await c.close();
  });

  it('lists the actions only when they changed to a client that asks so at reset: every reset, then each new set (τ-bench airline, once the user is known)', async () => {
    const { url } = await serve('fixtures/airline');
    const c = await client(url);
    const names = (m: { data: JsonObject }): string[] | undefined => ((m.data['observation'] as JsonObject)['actions'] as JsonObject[] | undefined)?.map((t) => (t['function'] as JsonObject)['name'] as string);
    const unchanged = (m: { data: JsonObject }): unknown => (m.data['observation'] as JsonObject)['actions_unchanged'];
    const reset = await c.ask({ type: 'reset', data: { actions: 'on_change' } });
    expect(names(reset)).toHaveLength(8);
    const calc = { type: 'step', data: { name: 'calculate', params: { expression: '1 + 2' } } };
    const same = await c.ask(calc);
    expect([names(same), unchanged(same)]).toEqual([undefined, true]);
    expect((same.data['observation'] as JsonObject)['observation']).toBe('3');
    const identified = await c.ask({ type: 'step', data: { name: 'get_user_details', params: { user_id: 'mia_li_3668' } } });
    expect([names(identified)?.length, unchanged(identified)]).toEqual([14, undefined]);
    expect(unchanged(await c.ask(calc))).toBe(true);
    // A new episode lists them again, and a reset that does not ask gets them with every reply.
    // (The suite's second initial state has its user known already: 14 actions from the start.)
    expect(names(await c.ask({ type: 'reset', data: { actions: 'on_change' } }))?.length).toBeGreaterThanOrEqual(8);
    await c.ask({ type: 'reset', data: {} });
    const always = await c.ask(calc);
    expect([names(always)?.length, unchanged(always)]).toEqual([expect.any(Number), undefined]);
    expect(await c.ask({ type: 'reset', data: { actions: 'sometimes' } })).toMatchObject({ type: 'error', data: { code: 'PARAMS_INVALID', message: expect.stringContaining('reset /actions must be "always"') } });
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

  it('serves both sides of an env that has two (τ²-bench telecom): the user\'s actions listed apart and sent with "actor": "user", recorded as the user\'s', async () => {
    const suite = 'fixtures/tau2-bench/telecom';
    const task = (await lines(path.join(suite, 'tasks', 'small.jsonl')))[0] as unknown as { id: string; actions: { name: string; params: JsonObject; actor?: 'user' }[] };
    const served = await serve('tau2-bench/telecom', { split: 'small' });
    const c = await client(served.url);
    const reset = await c.ask({ type: 'reset', data: { task_id: task.id } });
    const names = (key: string): string[] => ((reset.data['observation'] as JsonObject)[key] as { function: { name: string } }[]).map((t) => t.function.name);
    expect(names('actions')).toContain('refuel_data');
    expect(names('actions')).not.toContain('toggle_airplane_mode');
    expect(names('user_actions')).toContain('toggle_airplane_mode');
    expect(names('user_actions')).not.toContain('refuel_data');
    const userAction = task.actions.find((a) => a.actor === 'user') as { name: string; params: JsonObject };
    expect(await c.ask({ type: 'step', data: { name: userAction.name, params: userAction.params } })).toMatchObject({ type: 'error', data: { code: 'ACTION_WRONG_ACTOR' } });
    expect(await c.ask({ type: 'step', data: { ...userAction, actor: 'someone' } })).toMatchObject({ type: 'error', data: { code: 'PARAMS_INVALID', message: expect.stringMatching(/^\/data\/actor must be "agent" \(the default\) or "user"/) } });
    for (const a of task.actions) expect(await c.ask({ type: 'step', data: a })).toMatchObject({ data: { info: { status: 'resolved' } } });
    const state = (await c.ask({ type: 'state' })).data['state'] as JsonObject;
    expect(Object.keys(state)).toEqual(expect.arrayContaining(['db', 'user_db']));
    await c.close();
    await served.stop();
    const steps = await lines(path.join(served.dir, 'trajectories.jsonl'));
    expect(steps.map((s) => [s['action'], s['actor'] ?? 'agent'])).toEqual(task.actions.map((a) => [a.name, a.actor ?? 'agent']));
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

  it('a client that leaves while its step waits on a tool that ignores its signal: the call is cancelled, the episode ends client_closed, the server stops', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'agent-serve-hang-'));
    stops.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(path.join(dir, 'env.json'), JSON.stringify({ name: 'hang', state: { type: 'object' }, initial_states: [{}], actions: [{ name: 'hang', parameters: { type: 'object' } }, { name: 'now', parameters: { type: 'object' } }], module: 'tools.mjs' }));
    await writeFile(path.join(dir, 'tools.mjs'), 'export const hang = () => new Promise(() => {});\nexport const now = () => ({ observation: "ok" });\n');
    const served = await serve(dir);
    const c = await client(served.url);
    await c.ask({ type: 'reset', data: {} });
    // A request with an id is answered with it (the reply is serialized apart from other messages).
    expect(await c.ask({ type: 'step', id: 'a-1', data: { name: 'now' } })).toMatchObject({ type: 'observation', id: 'a-1', data: { observation: { observation: 'ok', step: 1 } } });
    const ws = new WebSocket(`${served.url.replace(/^http/, 'ws')}/ws`);
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ type: 'reset', data: { episode_id: 'hung' } }));
    await new Promise((r) => ws.once('message', r));
    ws.send(JSON.stringify({ type: 'step', data: { name: 'hang' } }));
    // The call is running (its trace dispatched) when the client goes.
    while (!(await readFile(path.join(served.dir, 'events.jsonl'), 'utf8').catch(() => '')).includes('"action":"hang"')) await new Promise((r) => setTimeout(r, 10));
    ws.terminate();
    await c.close();
    const summary = await served.stop();
    expect(summary.episodes.by_reason).toEqual({ client_closed: 2 });
    const steps = await lines(path.join(served.dir, 'trajectories.jsonl'));
    expect(steps.map((s) => [s['action'], s['status'], (s['error'] as JsonObject | undefined)?.['code']])).toEqual([['now', 'resolved', undefined], ['hang', 'failed', 'TOOL_CANCELLED']]);
  });

  it('serves the stateless HTTP routes with sessions kept by episode id and session token', async () => {
    const { url } = await serve('fixtures/weather');
    const post = async (route: string, body: object): Promise<{ status: number; body: JsonObject }> => {
      const res = await fetch(`${url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as JsonObject };
    };
    expect(await (await fetch(`${url}/health`)).json()).toMatchObject({ status: 'healthy', sessions: 0 });
    const reset = await post('/reset', { seed: 0 });
    const id = (reset.body['observation'] as JsonObject)['episode_id'] as string;
    const token = reset.body['session_token'] as string;
    expect(token).toMatch(/^[0-9a-f]{32}$/);
    const step = await post('/step', { episode_id: id, session_token: token, action: { name: 'get_weather', params: { city: 'Paris' } } });
    expect(step).toMatchObject({ status: 200, body: { observation: { observation: { city: 'Paris' } }, done: false } });
    expect(await (await fetch(`${url}/state?episode_id=${id}`, { headers: { 'x-session-token': token } })).json()).toMatchObject({ episode_id: id, step_count: 1 });
    expect(await (await fetch(`${url}/state?episode_id=${id}&session_token=${token}`)).json()).toMatchObject({ episode_id: id, step_count: 1 });
    expect(await post('/step', { session_token: token, action: { name: 'get_weather', params: { city: 'Paris' } } })).toMatchObject({ status: 400, body: { code: 'PARAMS_INVALID', error: 'episode_id is missing' } });
    expect(await post('/step', { episode_id: id, session_token: token, action: { name: 'get_weather', params: { city: 3 } } })).toMatchObject({ status: 400, body: { code: 'PARAMS_INVALID', pointer: '/city' } });
    expect(await post('/close', { episode_id: id, session_token: token })).toMatchObject({ status: 200, body: { closed: true } });
    expect(await post('/step', { episode_id: id, session_token: token, action: { name: 'get_weather', params: { city: 'Paris' } } })).toMatchObject({ status: 404, body: { code: 'UNKNOWN_EPISODE' } });
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

describe('agent serve: one session never touches another', () => {
  const post = async (url: string, route: string, body: object): Promise<{ status: number; body: JsonObject }> => {
    const res = await fetch(`${url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as JsonObject };
  };
  const step = { name: 'get_weather', params: { city: 'Paris' } };

  it('an HTTP session is driven and read only with its token: a guessed id is UNKNOWN_EPISODE, and the owner goes on', async () => {
    const { url } = await serve('fixtures/weather');
    const a = await post(url, '/reset', {});
    const id = (a.body['observation'] as JsonObject)['episode_id'] as string;
    const token = a.body['session_token'] as string;
    const b = await post(url, '/reset', {});
    const other = b.body['session_token'] as string;
    for (const attempt of [undefined, other, 'x'.repeat(32)]) {
      const withToken = attempt === undefined ? {} : { session_token: attempt };
      expect(await post(url, '/step', { episode_id: id, action: step, ...withToken })).toMatchObject({ status: 404, body: { code: 'UNKNOWN_EPISODE' } });
      expect(await post(url, '/close', { episode_id: id, ...withToken })).toMatchObject({ status: 404, body: { code: 'UNKNOWN_EPISODE' } });
      const headers: Record<string, string> = attempt === undefined ? {} : { 'x-session-token': attempt };
      expect((await fetch(`${url}/state?episode_id=${id}`, { headers })).status).toBe(404);
      expect(await (await fetch(`${url}/episodes/${id}/rewards`, { headers })).json()).toMatchObject({ code: 'UNKNOWN_EPISODE' });
    }
    expect(await post(url, '/step', { episode_id: id, session_token: token, action: step })).toMatchObject({ status: 200, body: { observation: { step: 1 } } });
    expect(await (await fetch(`${url}/episodes/${id}/rewards`, { headers: { 'x-session-token': token } })).json()).toMatchObject({ episode_id: id, rewards: expect.any(Array) });
  });

  it("a socket reads only its own episodes' rewards, over WebSocket and HTTP alike", async () => {
    const { url } = await serve('fixtures/weather');
    const a = await client(url);
    const id = ((await a.ask({ type: 'reset' })).data['observation'] as JsonObject)['episode_id'] as string;
    await a.ask({ type: 'step', data: step });
    expect(await a.ask({ type: 'rewards', data: { episode_id: id } })).toMatchObject({ type: 'rewards', data: { episode_id: id } });
    const b = await client(url);
    await b.ask({ type: 'reset' });
    expect(await b.ask({ type: 'rewards', data: { episode_id: id } })).toMatchObject({ type: 'error', data: { code: 'UNKNOWN_EPISODE' } });
    expect((await fetch(`${url}/episodes/${id}/rewards`)).status).toBe(404);
    await Promise.all([a.close(), b.close()]);
  });

  it('refuses --workers that is not a Redis URL, on an env without tasks, or whose Redis is not there, serving nothing', async () => {
    const out = await mkdtemp(path.join(tmpdir(), 'serve-workers-'));
    try {
      await expect(serveEnv({ env: 'fixtures/lookup', listen: 0, out, workers: { store: 'http://127.0.0.1:6379' } }, new AbortController().signal)).rejects.toThrow(/--workers 'http:\/\/127.0.0.1:6379' is not a Redis URL/);
      await expect(serveEnv({ env: 'fixtures/weather', listen: 0, out, workers: { store: 'redis://127.0.0.1:1/0' } }, new AbortController().signal)).rejects.toThrow(/has no tasks to roll out/);
      // A Redis that is not there: said, and the env loaded for it released (no handle left open).
      await expect(serveEnv({ env: 'fixtures/lookup', listen: 0, out, workers: { store: 'redis://127.0.0.1:1/0' } }, new AbortController().signal)).rejects.toThrow(/127\.0\.0\.1:1/);
      expect(await readdir(out)).toEqual([]);
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  it("forgets a connected socket's finished episodes past keptEpisodes once their rewards are in, keeping its live one", async () => {
    const { url } = await serve('fixtures/weather', { keptEpisodes: 2 });
    const a = await client(url);
    const ids: string[] = [];
    const judged = async (id: string): Promise<void> => {
      // The judge's verdict lands ~200 ms after the step: until then the episode is kept whatever keptEpisodes says.
      while (!((await a.ask({ type: 'rewards', data: { episode_id: id } })).data['rewards'] as JsonObject[]).some((r) => r['source'] === 'llm_score' && r['type'] === 'reward_arrived')) await new Promise((r) => setTimeout(r, 20));
    };
    for (let i = 0; i < 5; i++) {
      ids.push(((await a.ask({ type: 'reset' })).data['observation'] as JsonObject)['episode_id'] as string);
      await a.ask({ type: 'step', data: step });
      await judged(ids[i] as string);
    }
    await a.ask({ type: 'reset' });
    const codes: unknown[] = [];
    for (const id of ids) codes.push((await a.ask({ type: 'rewards', data: { episode_id: id } })).data['code'] ?? 'kept');
    // The socket stays connected: its first episodes go all the same (a trainer's socket lives for its whole run).
    expect(codes).toEqual(['UNKNOWN_EPISODE', 'UNKNOWN_EPISODE', 'UNKNOWN_EPISODE', 'UNKNOWN_EPISODE', 'kept']);
    await a.close();
  });

  it('keeps a finished episode past keptEpisodes while a reward of it is still to come', async () => {
    // llm_score delivered from outside, never here: every episode keeps waiting for it.
    const { url } = await serve('fixtures/weather', { keptEpisodes: 1, rewardSources: { llm_score: { external: {} } } });
    const a = await client(url);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      ids.push(((await a.ask({ type: 'reset' })).data['observation'] as JsonObject)['episode_id'] as string);
      await a.ask({ type: 'step', data: step });
    }
    await a.ask({ type: 'reset' });
    for (const id of ids) expect(await a.ask({ type: 'rewards', data: { episode_id: id } })).toMatchObject({ type: 'rewards', data: { episode_id: id } });
    await a.close();
  });

  it('a client-chosen id names a new episode or is refused (EPISODE_EXISTS), and is checked before it goes anywhere', async () => {
    const { url } = await serve('fixtures/weather');
    const a = await client(url);
    const b = await client(url);
    expect(await a.ask({ type: 'reset', data: { episode_id: 'ep-4' } })).toMatchObject({ type: 'observation', data: { observation: { episode_id: 'ep-4' } } });
    expect(await b.ask({ type: 'reset', data: { episode_id: 'ep-4' } })).toMatchObject({ type: 'error', data: { code: 'EPISODE_EXISTS' } });
    expect(await a.ask({ type: 'reset', data: { episode_id: 'ep-4' } })).toMatchObject({ type: 'error', data: { code: 'EPISODE_EXISTS' } });
    expect(await post(url, '/reset', { episode_id: 'ep-4' })).toMatchObject({ status: 409, body: { code: 'EPISODE_EXISTS' } });
    // A later unnamed session is never ep-4: it gets an id of its own.
    const unnamed = await b.ask({ type: 'reset' });
    expect((unnamed.data['observation'] as JsonObject)['episode_id']).toMatch(/^ep-[0-9a-f]{32}$/);
    for (const bad of ['../../etc/passwd', 'a:b', 'x'.repeat(129), '-leading', 'sp ace', 'é']) {
      expect(await b.ask({ type: 'reset', data: { episode_id: bad } })).toMatchObject({ type: 'error', data: { code: 'PARAMS_INVALID', message: expect.stringContaining('/episode_id') } });
    }
    await Promise.all([a.close(), b.close()]);
  });

  it('a client that stops answering is cut off after --ws-timeout: its episode ends client_lost, its slot is freed', async () => {
    const served = await serve('fixtures/weather', { maxSessions: 1, wsTimeoutMs: 300 });
    // A peer that vanished: it never answers the server's pings.
    const ghost = new WebSocket(`${served.url.replace(/^http/, 'ws')}/ws`, { autoPong: false });
    await new Promise((r) => ghost.once('open', r));
    const replied = new Promise((r) => ghost.once('message', r));
    ghost.send(JSON.stringify({ type: 'reset' }));
    await replied;
    const closed = await new Promise<number>((r) => ghost.once('close', (code) => r(code)));
    expect(closed).toBe(1006);
    const next = await client(served.url);
    expect(await next.ask({ type: 'reset' })).toMatchObject({ type: 'observation' });
    await next.close();
    while (((await (await fetch(`${served.url}/health`)).json()) as { sessions: number }).sessions > 0) await new Promise((r) => setTimeout(r, 10));
    const summary = await served.stop();
    expect(summary.episodes.by_reason).toEqual({ client_lost: 1, client_closed: 1 });
  });

  it('refuses a message over the limit with 1009 and the limit, not a bare close', async () => {
    const { url } = await serve('fixtures/weather');
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`);
    await new Promise((r) => ws.once('open', r));
    const closed = new Promise<[number, string]>((r) => ws.once('close', (code, reason) => r([code, String(reason)])));
    ws.send(JSON.stringify({ type: 'step', data: { name: 'get_weather', params: { city: 'x'.repeat(17 * 1024 * 1024) } } }));
    const [code, reason] = await closed;
    expect(code).toBe(1009);
    expect(reason).toMatch(/message over 16777216 bytes/);
  });

  it('answers a request nested 300,000 deep with an error naming the limit, and the episode goes on', async () => {
    const { url } = await serve('fixtures/weather');
    const c = await client(url);
    const id = ((await c.ask({ type: 'reset' })).data['observation'] as JsonObject)['episode_id'];
    const deep = `{"type":"step","data":{"name":"get_weather","params":{"city":${'['.repeat(300_000)}${']'.repeat(300_000)}}}}`;
    expect(await c.askRaw(deep)).toMatchObject({ type: 'error', data: { code: 'VALIDATION_ERROR', message: expect.stringContaining('512 levels') } });
    expect(await c.ask({ type: 'step', data: step })).toMatchObject({ type: 'observation', data: { observation: { episode_id: id, step: 1 } } });
    const res = await fetch(`${url}/reset`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"seed":${'['.repeat(300_000)}${']'.repeat(300_000)}}` });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: 'PARAMS_INVALID', error: expect.stringContaining('512 levels') });
    await c.close();
  });

  it('a client that asks for 50 states of 3 MB and reads nothing stalls only itself: /health answers, and every reply comes once it reads', async () => {
    const { url } = await serve('tau-bench/airline');
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`);
    await new Promise((r) => ws.once('open', r));
    const replies: { id: number; type: string }[] = [];
    ws.on('message', (m) => replies.push(JSON.parse(String(m)) as { id: number; type: string }));
    ws.send(JSON.stringify({ type: 'reset', id: 0, data: { task_id: 'airline-test-0' } }));
    while (replies.length === 0) await new Promise((r) => setTimeout(r, 5));
    ws.pause();
    for (let id = 1; id <= 50; id++) ws.send(JSON.stringify({ type: 'state', id }));
    for (let i = 0; i < 3; i++) expect(await (await fetch(`${url}/health`)).json()).toMatchObject({ status: 'healthy', sessions: 1 });
    ws.resume();
    while (replies.length < 51) await new Promise((r) => setTimeout(r, 10));
    expect(replies.slice(1).map((r) => r.type)).toEqual(Array.from({ length: 50 }, () => 'state'));
    expect(new Set(replies.map((r) => r.id)).size).toBe(51);
    ws.close();
  });
});
