/**
 * `agent serve --store redis://…` killed with SIGKILL: every step a client was answered is in the
 * run folder once the run is served again (`agent serve --resume`), the episodes that were open
 * end `client_lost`, new sessions continue the run, and no key of it stays in Redis; the rollouts'
 * curriculum carries on from where it was.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { sharedRedisAvailable, TEST_REDIS_URL } from '../src/state/redis-testing.js';
import { startFakeVllmServer } from '../src/llm/fake-vllm-server.js';
import { lookupModel } from '../src/serve/rollouts-testing.js';
import type { CurriculumFile } from '../src/replay/curriculum-file.js';
import { runAgent, scratch } from './testing.js';

const available = await sharedRedisAvailable('the agent serve --resume tests');
const tmp = scratch();
const admin = new Redis(TEST_REDIS_URL, { lazyConnect: !available });
afterAll(async () => {
  await tmp.cleanup();
  if (available) await admin.quit();
  else admin.disconnect();
});

interface Listening {
  readonly url: string;
  readonly dir: string;
}

/** `agent serve …` as a child process, once it listens (its --json line). */
async function serve(args: string[]): Promise<{ child: ResultPromise; listening: Listening }> {
  const child = execa('node', ['bin/agent.js', 'serve', '--port', '0', '--json', '--store', TEST_REDIS_URL, ...args], { reject: false });
  const listening = await new Promise<Listening>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      const line = out.split('\n').find((l) => l.includes('"listening"'));
      if (line) resolve(JSON.parse(line) as Listening);
    });
    void child.then((r) => reject(new Error(`agent serve exited ${String(r.exitCode)}: ${String(r.stderr)}`)));
  });
  return { child, listening };
}

async function connect(url: string): Promise<{ ask(message: object): Promise<{ type: string; data: Record<string, unknown> }>; close(): void }> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`);
  await new Promise((r) => ws.once('open', r));
  return {
    ask: (message) =>
      new Promise((resolve) => {
        ws.once('message', (raw) => resolve(JSON.parse(String(raw)) as { type: string; data: Record<string, unknown> }));
        ws.send(JSON.stringify(message));
      }),
    close: () => ws.terminate(),
  };
}

const step = { type: 'step', data: { name: 'get_weather', params: { city: 'Paris' } } };

describe.runIf(available)('agent serve --resume', () => {
  it('keeps every step its clients were answered across kill -9; open episodes end client_lost, new ones continue the run, its keys go', async () => {
    const out = await tmp.dir('serve-resume-');
    const first = await serve(['fixtures/weather', '--out', out, '--tool-option', 'latency_scale=0']);
    const runId = path.basename(first.listening.dir);
    const a = await connect(first.listening.url);
    const b = await connect(first.listening.url);
    await a.ask({ type: 'reset' });
    await b.ask({ type: 'reset' });
    let answered = 0;
    // Two episodes open at once, stepped in turn; the kill comes right after the last answer.
    for (let i = 0; i < 10; i++) {
      for (const client of [a, b]) {
        const reply = await client.ask(step);
        expect(reply).toMatchObject({ type: 'observation', data: { info: { status: 'resolved' } } });
        answered++;
      }
    }
    first.child.kill('SIGKILL');
    await first.child;
    a.close();
    b.close();
    expect(await admin.keys(`agent:${runId}:*`)).not.toEqual([]);

    const { code, stderr } = await runAgent(['run', '--resume', runId, '--store', TEST_REDIS_URL]);
    expect(code).toBe(2);
    expect(stderr).toContain(`agent serve --resume ${runId}`);

    const second = await serve(['--resume', runId]);
    expect(second.listening.dir).toBe(first.listening.dir);
    const c = await connect(second.listening.url);
    await c.ask({ type: 'reset' });
    expect(await c.ask(step)).toMatchObject({ data: { info: { status: 'resolved' } } });
    // Stopped while its client is still there: the open episode ends interrupted (a client that left first would make it client_closed).
    second.child.kill('SIGINT');
    const result = await second.child;
    c.close();
    expect(result.exitCode).toBe(0);
    expect(String(result.stderr)).toMatch(/resumed: 0 episode\(s\) finished before, 20 step\(s\) kept/);

    const dir = first.listening.dir;
    const summary = JSON.parse(await readFile(path.join(dir, 'summary.json'), 'utf8')) as { status: string; steps: { total: number }; episodes: { by_reason: Record<string, number> } };
    expect(summary.status).toBe('completed');
    expect(summary.steps.total).toBe(answered + 1);
    expect(summary.episodes.by_reason).toEqual({ client_lost: 2, interrupted: 1 });
    const trajectories = (await readFile(path.join(dir, 'trajectories.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { episode: number; step: number });
    expect(trajectories.filter((t) => t.episode < 2).map((t) => `${t.episode}:${t.step}`).sort()).toEqual([0, 1].flatMap((e) => Array.from({ length: 10 }, (_, i) => `${e}:${i + 1}`)).sort());
    expect(trajectories.filter((t) => t.episode === 2)).toHaveLength(1);
    const episodes = (await readFile(path.join(dir, 'episodes.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { episode: number; steps: number; reason: string });
    expect(episodes.sort((x, y) => x.episode - y.episode).map((e) => [e.episode, e.steps, e.reason])).toEqual([
      [0, 10, 'client_lost'],
      [1, 10, 'client_lost'],
      [2, 1, 'interrupted'],
    ]);
    expect(await admin.keys(`agent:${runId}:*`)).toEqual([]);
  });

  it('refuses to serve again a run that was not served, naming the command that resumes it', async () => {
    const out = await tmp.dir('serve-resume-run-');
    // A run stopped by Ctrl-C keeps its journal: interrupted, resumable by agent run.
    const child = execa('node', ['bin/agent.js', 'run', 'fixtures/weather', '--episodes', '4', '--concurrency', '1', '--tool-option', 'latency_scale=0.5', '--store', TEST_REDIS_URL, '--out', out], { reject: false });
    const runId = await new Promise<string>((resolve) => child.stderr?.on('data', (c: Buffer) => {
      const m = /^run (\S+):/m.exec(c.toString());
      if (m) resolve(m[1] as string);
    }));
    child.kill('SIGINT');
    await child;
    const { code, stderr } = await runAgent(['serve', '--resume', runId, '--store', TEST_REDIS_URL, '--port', '0']);
    expect(code).toBe(2);
    expect(stderr).toContain(`agent run --resume ${runId}`);
    expect((await runAgent(['run', '--resume', runId, '--store', TEST_REDIS_URL, '--tool-option', 'latency_scale=0'])).code).toBe(0);
    expect(await admin.keys(`agent:${runId}:*`)).toEqual([]);
  });

  it("keeps the rollouts' curriculum across kill -9: the resumed server's statistics and draws go on from the saved ones", async () => {
    await using model = await startFakeVllmServer({ reply: lookupModel });
    const out = await tmp.dir('serve-resume-curriculum-');
    const args = ['--split', 'train', '--llm-base-url', model.url];
    /** One rollouts request of two groups drawn by difficulty, to its end; the run's curriculum once it is on disk. */
    const episodes = (c: CurriculumFile): number => Object.values(c.tasks).reduce((a, t) => a + t.episodes, 0);
    const roll = async (url: string, dir: string, draws: number): Promise<CurriculumFile> => {
      const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`);
      await new Promise((r) => ws.once('open', r));
      const done = new Promise<Record<string, unknown>>((resolve) => ws.on('message', (raw) => {
        const m = JSON.parse(String(raw)) as { type: string; data: Record<string, unknown> };
        if (m.type === 'rollouts_done' || m.type === 'error') resolve(m.data);
      }));
      ws.send(JSON.stringify({ type: 'rollouts', id: 1, data: { task_ids: ['lookup-train-0', 'lookup-train-1', 'lookup-train-2'], groups: 2, n: 2, model: 'fake-model', sampler: 'difficulty' } }));
      expect(await done).toMatchObject({ groups: 2, tried: 2 });
      ws.terminate();
      const file = path.join(dir, 'curriculum.json');
      return vi.waitFor(async () => {
        const c = JSON.parse(await readFile(file, 'utf8')) as CurriculumFile;
        // Each draw is one group of two episodes: both counts saved, the last group's too.
        expect([c.draws, episodes(c)]).toEqual([draws, 2 * draws]);
        return c;
      });
    };
    const first = await serve(['fixtures/lookup', '--out', out, ...args]);
    const runId = path.basename(first.listening.dir);
    const before = await roll(first.listening.url, first.listening.dir, 2);
    first.child.kill('SIGKILL');
    await first.child;

    const second = await serve(['--resume', runId, ...args]);
    const after = await roll(second.listening.url, second.listening.dir, 4);
    second.child.kill('SIGINT');
    expect((await second.child).exitCode).toBe(0);
    expect([episodes(before), episodes(after)]).toEqual([4, 8]);
    // The lookups are all solved: every task kept its whole record, none started over.
    for (const [id, t] of Object.entries(before.tasks)) expect(after.tasks[id]?.episodes).toBeGreaterThanOrEqual(t.episodes);
    expect(await admin.keys(`agent:${runId}:*`)).toEqual([]);
  });
});
