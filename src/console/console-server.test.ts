/**
 * The web console's server and API on real run folders: every answer agrees with the run folder
 * (the trajectories, `agent debug --state`), lists page and filter, a schema violation is found
 * with its pointer and value, and only the page itself is open: the data needs the token, and a
 * foreign Host or Origin is refused.
 */
import { appendFile, copyFile, mkdir, readFile, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { scratch } from '../../commands/testing.js';
import { ConsoleServer, FolderFeed, inspectState, Run, type Policy } from '../internal.js';
import { applyPatch, type Patch } from '../state/patch.js';
import type { EpisodePage, EpisodeTimeline, HistoryAnswer, Overview, RewardFlow, TracePage, ViolationPage } from './api-types.js';
import { exportSteps } from '../replay/export.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

async function weatherRun(): Promise<string> {
  const run = await Run.prepare({ env: 'fixtures/weather', episodes: 4, concurrency: 2, maxSteps: 5, out: await tmp.dir('console-'), toolOptions: { latency_scale: 0.01 } });
  await run.execute();
  return run.dir as string;
}

async function consoleOn(dir: string, options: { follow?: boolean; pollMs?: number } = {}): Promise<{ server: ConsoleServer; feed: FolderFeed; get<T>(p: string): Promise<T>; raw(p: string, init?: RequestInit): Promise<Response> } & AsyncDisposable> {
  const feed = await FolderFeed.open(dir, { follow: options.follow ?? false, ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}) });
  await feed.ready();
  const server = await ConsoleServer.start({ feed, runDir: dir });
  const base = `http://127.0.0.1:${server.port}`;
  const raw = (p: string, init: RequestInit = {}): Promise<Response> => fetch(`${base}${p}`, init);
  return {
    server,
    feed,
    raw,
    async get<T>(p: string): Promise<T> {
      const res = await raw(p, { headers: { authorization: `Bearer ${server.token}` } });
      expect(res.status, `${p}: ${await res.clone().text()}`).toBe(200);
      return (await res.json()) as T;
    },
    async [Symbol.asyncDispose]() {
      await server[Symbol.asyncDispose]();
      await feed[Symbol.asyncDispose]();
    },
  };
}

describe('the web console API', async () => {
  const dir = await weatherRun();
  const steps = (await readFile(path.join(dir, 'trajectories.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { episode: number; step: number; trace_id: string; action: string; state_seq: number });

  it('gives an overview that agrees with the run folder', async () => {
    await using c = await consoleOn(dir);
    const o = await c.get<Overview>('/api/overview');
    expect(o.run).toMatchObject({ env: 'weather', episodes: 4, status: 'completed' });
    expect(o.traces).toEqual({ total: steps.length, pending: 0, settled: steps.length, failed: 0 });
    expect(o.episodes).toEqual({ seen: 4, finished: 4 });
    expect(o.throughput.counts.reduce((a, b) => a + b, 0)).toBe(steps.length);
    expect(o.rewards.map((r) => r.source).sort()).toEqual(['api_latency', 'llm_score']);
    for (const r of o.rewards) expect(Object.values(r.counts).reduce((a, b) => a + b, 0)).toBe(steps.length);
    expect(o.feed).toMatchObject({ phase: 'finished', events: c.feed.index.events });
  });

  it('pages through every trace in dispatch order or newest first, and filters them', async () => {
    await using c = await consoleOn(dir);
    const all = await c.get<TracePage>('/api/traces?limit=1000');
    expect(all.total).toBe(steps.length);
    expect(new Set(all.rows.map((t) => t.trace_id))).toEqual(new Set(steps.map((s) => s.trace_id)));
    const page = await c.get<TracePage>('/api/traces?offset=3&limit=4');
    expect(page.rows.map((t) => t.trace_id)).toEqual(all.rows.slice(3, 7).map((t) => t.trace_id));
    const newest = await c.get<TracePage>('/api/traces?order=desc&limit=2');
    expect(newest.rows.map((t) => t.trace_id)).toEqual(all.rows.slice(-2).reverse().map((t) => t.trace_id));
    const ep1 = await c.get<TracePage>('/api/traces?episode=1&limit=100');
    expect(ep1.total).toBe(steps.filter((s) => s.episode === 1).length);
    expect(ep1.rows.every((t) => t.episode === 1)).toBe(true);
    expect((await c.get<TracePage>('/api/traces?q=ep:2 status:resolved')).total).toBe(steps.filter((s) => s.episode === 2).length);
    expect((await c.get<TracePage>('/api/traces?status=failed')).total).toBe(0);
    expect(all.tools).toEqual([...new Set(steps.map((s) => s.action))].sort());
  });

  it('lists each episode with its return as agent export counts it, the judge’s late values in', async () => {
    await using c = await consoleOn(dir);
    const page = await c.get<EpisodePage>('/api/episodes?limit=100');
    const exported = new Map((await exportSteps(dir, { state: 'none' })).map((r) => [r.episode, r.episode_return]));
    expect(page.rows.map((e) => [e.episode, e.reward, e.pending_rewards])).toEqual([...exported].sort(([a], [b]) => a - b).map(([episode, value]) => [episode, value, undefined]));
  });

  it("lays out an episode's traces, commits and rewards on one time axis", async () => {
    await using c = await consoleOn(dir);
    const tl = await c.get<EpisodeTimeline>('/api/episodes/0/timeline');
    const mine = steps.filter((s) => s.episode === 0);
    expect(tl.traces.map((t) => t.trace_id).sort()).toEqual(mine.map((s) => s.trace_id).sort());
    for (const t of tl.traces) {
      expect(t.status).toBe('resolved');
      expect(t.settled_at).toBeGreaterThanOrEqual(t.dispatched_at);
      expect(t.started_at).toBeGreaterThanOrEqual(t.dispatched_at);
    }
    expect(tl.commits.map((x) => x.seq)).toEqual(mine.map((s) => s.state_seq).sort((a, b) => a - b));
    expect(tl.traces.map((t) => t.seq).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(tl.commits.map((x) => x.seq));
    expect(tl.rewards.filter((r) => r.kind === 'arrived')).toHaveLength(mine.length * 2);
  });

  it("replays an episode's history to the same state at every seq as agent debug --state", async () => {
    await using c = await consoleOn(dir);
    for (const episode of [0, 3]) {
      const h = await c.get<HistoryAnswer>(`/api/episodes/${episode}/history`);
      let state = h.initial;
      expect(state).toEqual((await inspectState(dir, episode, { seq: 0 })).state);
      for (const commit of h.commits) {
        state = applyPatch(state, commit.patch as unknown as Patch);
        expect(state, `episode ${episode} seq ${commit.seq}`).toEqual((await inspectState(dir, episode, { seq: commit.seq })).state);
      }
    }
  });

  it("shows each reward source's flow: counts, arrival delays, nothing pending in a finished run", async () => {
    await using c = await consoleOn(dir);
    const flow = await c.get<RewardFlow>('/api/rewards');
    expect(flow.live).toBe(false);
    for (const s of flow.sources) {
      expect(s.delays.reduce((a, d) => a + d.count, 0)).toBe(s.counts.arrived + s.counts.late);
      expect(s.pending).toEqual([]);
      expect(s.on_time).toBe(1);
    }
  });

  it('finds a schema violation with its pointer and offending value, and filters violations', async () => {
    const doubling: Policy = () => ({ name: 'double_score', params: { points: 80 } });
    const bad = await Run.prepare({ env: 'fixtures/buggy', episodes: 1, maxSteps: 2, out: await tmp.dir('console-buggy-'), policy: doubling });
    await bad.execute();
    await using c = await consoleOn(bad.dir as string);
    const v = await c.get<ViolationPage>('/api/violations');
    expect(v.total).toBe(2);
    expect(v.rows[0]).toMatchObject({ kind: 'patch', code: 'STATE_INVALID', episode: 0, trace_id: 'ep-0:1', action: 'double_score', pointer: '/score', value: 160 });
    expect((await c.get<ViolationPage>('/api/violations?q=kind:params')).total).toBe(0);
    expect((await c.get<Overview>('/api/overview')).errors_by_tool[0]).toMatchObject({ tool: 'double_score', code: 'STATE_INVALID' });
  });

  it("summarises a benchmark run's report beside its run", async () => {
    const copy = path.join(await tmp.dir('console-bench-'), 'run');
    await mkdir(copy);
    for (const f of ['events.jsonl', 'run.json', 'states.jsonl', 'episodes.jsonl', 'trajectories.jsonl', 'rewards.jsonl', 'summary.json']) await copyFile(path.join(dir, f), path.join(copy, f));
    const tasks = [0, 1, 2, 3].map((e) => ({ id: `t-${e}`, trials: [{ trial: 0, episode: e, reward: e / 4, success: e !== 2 }] }));
    await writeFile(path.join(copy, 'benchmark.json'), JSON.stringify({ suite: 'weather-suite', policy: 'random', trials: 1, duration_ms: 10, metrics: { success_rate: { value: 0.75, ci_low: 0.3, ci_high: 0.95 } }, tasks }));
    await using c = await consoleOn(copy);
    const o = await c.get<Overview>('/api/overview');
    expect(o.benchmark).toMatchObject({ suite: 'weather-suite', success_rate: { value: 0.75 } });
    expect(o.benchmark?.tasks.map((t) => [t.id, t.success, t.episodes])).toEqual([
      ['t-0', true, [0]],
      ['t-1', true, [1]],
      ['t-2', false, [2]],
      ['t-3', true, [3]],
    ]);
  });

  it("shows a served run's rollouts curriculum, the tasks the difficulty sampler favours first, re-read as it changes", async () => {
    const copy = path.join(await tmp.dir('console-curriculum-'), 'run');
    await mkdir(copy);
    for (const f of ['events.jsonl', 'run.json', 'states.jsonl', 'episodes.jsonl', 'trajectories.jsonl', 'rewards.jsonl', 'summary.json']) await copyFile(path.join(dir, f), path.join(copy, f));
    const task = (recent: number[], episodes: number): object => ({ episodes, groups: episodes / 2, mean_reward: recent.reduce((a, b) => a + b, 0) / recent.length, recent, weight_version: 3, last_seen: 1 });
    const write = (tasks: Record<string, object>, draws: number): Promise<void> => writeFile(path.join(copy, 'curriculum.json'), JSON.stringify({ format: 1, draws, tasks }));
    await write({ solved: task([1, 1], 2), half: task([1, 0], 2), mostly: task([1, 1, 1, 0], 4) }, 3);
    await using c = await consoleOn(copy);
    const first = (await c.get<Overview>('/api/overview')).curriculum;
    expect(first?.draws).toBe(3);
    expect(first?.tasks.map((t) => [t.id, t.weight, t.recent_success])).toEqual([
      ['half', 1, 0.5],
      ['mostly', 0.75, 0.75],
      ['solved', 0.05, 1],
    ]);
    await write({ solved: task([1, 1, 0, 0], 4) }, 5);
    // A new modification time: read again (set apart from the first write's in case both fall in one tick).
    await utimes(path.join(copy, 'curriculum.json'), new Date(), new Date(Date.now() + 5_000));
    expect((await c.get<Overview>('/api/overview')).curriculum).toMatchObject({ draws: 5, tasks: [{ id: 'solved', weight: 1 }] });
    expect((await c.get<Overview>('/api/overview')).benchmark).toBeUndefined();
  });

  it('says what is wrong: an unknown episode or route, a bad page offset, a write', async () => {
    await using c = await consoleOn(dir);
    const auth = { authorization: `Bearer ${c.server.token}` };
    const nine = await c.raw('/api/episodes/9/history', { headers: auth });
    expect(nine.status).toBe(404);
    expect(((await nine.json()) as { error: string }).error).toMatch(/no episode 9/);
    expect((await c.raw('/api/nope', { headers: auth })).status).toBe(404);
    const bad = await c.raw('/api/traces?offset=-1', { headers: auth });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toContain('?offset=');
    expect((await c.raw('/api/overview', { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' })).status).toBe(405);
  });
});

describe('who the console lets in', async () => {
  const dir = await weatherRun();

  it('serves the page to anyone on this machine, the data only with the token', async () => {
    await using c = await consoleOn(dir);
    const page = await c.raw('/');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("connect-src 'self'");
    expect(await page.text()).toContain('/assets/console.js');
    const js = await c.raw('/assets/console.js');
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect((await js.text()).length).toBeGreaterThan(10_000);
    expect((await c.raw('/api/overview')).status).toBe(401);
    expect((await c.raw('/api/overview', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect(c.server.url).toBe(`http://127.0.0.1:${c.server.port}/#token=${encodeURIComponent(c.server.token)}`);
  });

  it('refuses another origin and a re-pointed Host, even with the token', async () => {
    await using c = await consoleOn(dir);
    const auth = { authorization: `Bearer ${c.server.token}` };
    expect((await c.raw('/api/overview', { headers: { ...auth, origin: 'https://evil.example' } })).status).toBe(403);
    expect((await c.raw('/api/overview', { headers: { ...auth, 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      request({ host: '127.0.0.1', port: c.server.port, path: '/', headers: { host: 'attacker.example' } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    expect(status).toBe(403);
  });

  it('will not serve off loopback without a token', async () => {
    await using feed = await FolderFeed.open(dir, { follow: false });
    await expect(ConsoleServer.start({ feed, host: '0.0.0.0' })).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringContaining('needs a token') });
  });
});

describe('/api/updates', () => {
  it('tells the page each time the index moves, never falling behind: the last line is the last version', async () => {
    const dir = await weatherRun();
    const live = path.join(await tmp.dir('console-live-'), 'run');
    await mkdir(live);
    for (const f of ['run.json', 'states.jsonl']) await copyFile(path.join(dir, f), path.join(live, f));
    const events = (await readFile(path.join(dir, 'events.jsonl'), 'utf8')).trim().split('\n');
    // The run's start only; the rest lands below while the page listens.
    await writeFile(path.join(live, 'events.jsonl'), `${events.slice(0, 5).join('\n')}\n`);
    await using c = await consoleOn(live, { follow: true, pollMs: 5 });
    const res = await c.raw('/api/updates', { headers: { authorization: `Bearer ${c.server.token}` } });
    expect(res.headers.get('content-type')).toContain('application/x-ndjson');
    const reader = (res.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
    const lines: { version: number; events: number; phase: string }[] = [];
    let buffered = '';
    const readUntil = async (done: () => boolean): Promise<void> => {
      while (!done()) {
        const { value } = await reader.read();
        buffered += value ?? '';
        const parts = buffered.split('\n');
        buffered = parts.pop() ?? '';
        for (const p of parts) if (p.trim() !== '') lines.push(JSON.parse(p) as (typeof lines)[number]);
      }
    };
    await readUntil(() => lines.length >= 1);
    expect(lines[0]).toMatchObject({ events: 5, phase: 'following' });
    let changes = 0;
    c.feed.onChange(() => changes++);
    for (let i = 5; i < events.length; i += 7) await appendFile(path.join(live, 'events.jsonl'), `${events.slice(i, i + 7).join('\n')}\n`);
    await vi.waitFor(() => expect(c.feed.index.events).toBe(events.length), { timeout: 10_000, interval: 5 });
    await readUntil(() => lines.at(-1)?.events === events.length && lines.at(-1)?.phase === 'finished');
    // One line per change at most (several changes inside 100 ms make one line), and every line newer than the one before.
    expect(lines.length - 1).toBeLessThanOrEqual(changes);
    for (let i = 1; i < lines.length; i++) expect((lines[i] as (typeof lines)[number]).version).toBeGreaterThan((lines[i - 1] as (typeof lines)[number]).version);
    await reader.cancel();
  });
});
