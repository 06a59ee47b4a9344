/**
 * `agent serve --workers`: a rollouts request's episodes run on `agent worker`s through the Redis
 * queue, and come back whole. Two workers serve one request while one of them is killed (SIGKILL)
 * mid-way: its episodes are run again by the other, and every group is sent exactly once; the
 * trainer's weight version and pause reach the workers; a cancelled request ends its episodes on them.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { RolloutWorker, type WorkerEvent } from '../run/rollout-worker.js';
import { sharedRedisAvailable, TEST_REDIS_URL } from '../state/redis-testing.js';
import type { TokenRecord } from '../replay/token-export.js';
import { ask, cleanups, cleanUp, connect, lookupModel, over, setup } from './rollouts-testing.js';

const available = await sharedRedisAvailable('the rollouts-on-workers tests');
const admin = new Redis(TEST_REDIS_URL, { lazyConnect: !available });
afterEach(cleanUp);
afterAll(async () => {
  if (available) await admin.quit();
  else admin.disconnect();
});

/** A queue of this test's own: nothing else takes its episodes, and its keys go at the end. */
function queueName(): string {
  const name = `agent-test:rollouts:${Math.random().toString(36).slice(2, 10)}`;
  cleanups.push(() => admin.del(name, `${name}:workers`));
  return name;
}

/** A worker in this process, working until the test ends; its events kept. */
async function worker(queue: string, concurrency: number): Promise<{ readonly worker: RolloutWorker; readonly events: WorkerEvent[] }> {
  const w = await RolloutWorker.start({ store: TEST_REDIS_URL, queue, concurrency, leaseMs: 1_000 });
  const events: WorkerEvent[] = [];
  w.events.onAny((e) => events.push(e));
  const controller = new AbortController();
  const working = w.work(controller.signal);
  cleanups.push(async () => {
    controller.abort();
    await working;
    await w[Symbol.asyncDispose]();
  });
  return { worker: w, events };
}

/** Polls `check` until it holds (a minute at most, then fails saying what it waited for). */
async function until(what: string, check: () => boolean): Promise<void> {
  for (const start = Date.now(); !check(); ) {
    if (Date.now() - start > 60_000) throw new Error(`waited a minute for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.runIf(available)('agent serve --workers', () => {
  it('runs a request on two workers, one killed mid-way: its episodes run again on the other, every group sent once, the run folder has each episode once', async () => {
    const queue = queueName();
    const { model, url, dir, stop } = await setup({ reply: lookupModel, delayMs: 150 }, { workers: { store: TEST_REDIS_URL, queue } });
    // The worker to be killed: a process of its own, so that SIGKILL takes it down mid-episode.
    const doomed = execa('node', ['bin/agent.js', 'worker', '--store', TEST_REDIS_URL, '--queue', queue, '--concurrency', '3', '--lease', '1s', '--json'], { reject: false });
    cleanups.push(async () => {
      doomed.kill('SIGKILL');
      await doomed;
    });
    const lines: Record<string, unknown>[] = [];
    doomed.stdout?.on('data', (chunk: Buffer) => lines.push(...String(chunk).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)));
    await until('the doomed worker to start', () => lines.some((l) => l['type'] === 'worker_started'));
    const doomedId = lines.find((l) => l['type'] === 'worker_started')?.['id'];

    const client = await connect(url);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { task_ids: ['lookup-train-0', 'lookup-train-1'], n: 3 }) });
    // It holds three episodes; the other worker starts, and then it dies with them.
    await until('the doomed worker to claim three episodes', () => lines.filter((l) => l['type'] === 'claimed').length === 3);
    const survivor = await worker(queue, 6);
    doomed.kill('SIGKILL');
    await doomed;

    const done = await client.until((m) => over(m, 1));
    const groups = done.filter((m) => m.type === 'rollout_group').map((m) => m.data as { group_id: string; task_id: string; records: TokenRecord[] });
    expect(done.at(-1), JSON.stringify(done.at(-1))).toMatchObject({ type: 'rollouts_done', data: { groups: 2, episodes: 6, failed: 0 } });
    expect(groups.map((g) => g.task_id).sort()).toEqual(['lookup-train-0', 'lookup-train-1']);
    const episodes = groups.flatMap((g) => g.records.map((r) => r.episode));
    expect(new Set(episodes).size).toBe(6);
    // Every record is a whole conversation (lookup, answer), solved: nothing of the dead worker's half-done episodes mixed in.
    for (const g of groups) for (const r of g.records) expect([r.turns.length, r.reward]).toEqual([2, 1]);
    // The survivor ran the doomed worker's three episodes again once their lease lapsed.
    const takenOver = survivor.events.filter((e) => e.type === 'claimed' && e.previousOwner === doomedId);
    expect(takenOver).toHaveLength(3);
    expect(survivor.events.filter((e) => e.type === 'episode_done')).toHaveLength(6);

    const summary = await stop();
    expect(summary.episodes.finished).toBe(6);
    const records = (await readFile(path.join(dir, 'episodes.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { episode: number; steps: number });
    expect(records.map((r) => r.episode).sort()).toEqual([...episodes].sort());
    expect(records.every((r) => r.steps === 2)).toBe(true);
    const steps = (await readFile(path.join(dir, 'trajectories.jsonl'), 'utf8')).trim().split('\n');
    expect(steps).toHaveLength(12);
    // The run's rollout keys and the queue's entries are gone once the server stopped.
    expect(await admin.keys(`agent:${summary.run_id}:*rollouts*`)).toEqual([]);
    expect(await admin.xlen(queue)).toBe(0);
  });

  it("holds the workers' completions while the trainer pauses, and the turns after its weight push carry the new version", async () => {
    const queue = queueName();
    const { model, url } = await setup({ reply: lookupModel }, { workers: { store: TEST_REDIS_URL, queue } });
    const { worker: w } = await worker(queue, 4);
    const client = await connect(url);
    client.send({ type: 'weight_version', id: 1, data: { version: 0 } });
    await client.until((m) => m.id === 1);
    client.send({ type: 'pause', id: 2 });
    await client.until((m) => m.id === 2);
    client.send({ type: 'rollouts', id: 3, data: ask(model.url, { task_ids: ['lookup-train-0'], n: 2 }) });
    await until('both episodes to wait at the pause on the worker', () => w.holding === 2);
    // One completion only: the worker's start-up probe of the server, no turn.
    expect(model.completions).toHaveLength(1);
    client.send({ type: 'weight_version', id: 4, data: { version: 1 } });
    await client.until((m) => m.id === 4);
    client.send({ type: 'resume', id: 5 });
    await client.until((m) => m.id === 5);
    const done = await client.until((m) => over(m, 3));
    const group = done.find((m) => m.type === 'rollout_group')?.data as { records: TokenRecord[] };
    expect(group.records.flatMap((r) => r.turns.map((t) => t.weight_version))).toEqual([1, 1, 1, 1]);
    expect(w.holding).toBe(0);
  });

  it('journals the episodes the workers delivered when the server itself is durable (--store redis://): the folder has them, and nothing stays in Redis', async () => {
    const queue = queueName();
    const { model, url, dir, stop } = await setup({ reply: lookupModel }, { workers: { store: TEST_REDIS_URL, queue }, store: TEST_REDIS_URL });
    await worker(queue, 4);
    const client = await connect(url);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { task_ids: ['lookup-train-0'], n: 2 }) });
    expect((await client.until((m) => over(m, 1))).at(-1)).toMatchObject({ type: 'rollouts_done', data: { groups: 1, episodes: 2 } });
    const summary = await stop();
    expect([summary.status, summary.episodes.finished, summary.steps.total]).toEqual(['completed', 2, 4]);
    const lines = async (file: string): Promise<number> => (await readFile(path.join(dir, file), 'utf8')).trim().split('\n').length;
    expect([await lines('episodes.jsonl'), await lines('trajectories.jsonl')]).toEqual([2, 4]);
    expect(await admin.keys(`agent:${summary.run_id}:*`)).toEqual([]);
  });

  it('ends the episodes of a cancelled request on the workers, and those no worker took yet here, each client_closed', async () => {
    const queue = queueName();
    // Every completion waits until the test lets it go: the episodes are all in flight when cancelled.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const { model, url, dir, stop } = await setup({ reply: lookupModel, gate: () => held }, { workers: { store: TEST_REDIS_URL, queue } });
    const { events } = await worker(queue, 2);
    const client = await connect(url);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { task_ids: ['lookup-train-0'], n: 4 }) });
    await until('the worker to take two episodes', () => events.filter((e) => e.type === 'claimed').length === 2);
    client.send({ type: 'cancel', id: 2, data: { id: 1 } });
    const done = await client.until((m) => over(m, 1));
    expect(done.at(-1)?.type).toBe('error');
    release();
    const summary = await stop();
    expect(summary.episodes.finished).toBe(4);
    const records = (await readFile(path.join(dir, 'episodes.jsonl'), 'utf8').catch(() => '')).trim().split('\n').filter((l) => l !== '');
    const reasons = records.map((l) => (JSON.parse(l) as { reason: string }).reason);
    // The two on the worker ended client_closed there (with their records); the two still queued never started.
    expect(reasons).toEqual(['client_closed', 'client_closed']);
  });
});
