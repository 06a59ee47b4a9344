/**
 * events.index, the run writer's digest of events.jsonl: replaying it must build exactly the index
 * that reading every event builds, whatever state the two files were left in.
 */
import { copyFile, open, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { Run, type RunEvent } from '../index.js';
import { scratch } from '../../commands/testing.js';
import { FolderFeed } from './folder-feed.js';
import { readIndexFile } from './run-index-file.js';
import { RUN_FILES, RunWriter } from './run-writer.js';
import { RunIndex } from './run-index.js';
import { exportSteps } from './export.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

/** Everything a debug view reads of the index, as one comparable value. */
async function indexOf(dir: string): Promise<unknown> {
  await using feed = await FolderFeed.open(dir, { follow: false });
  await feed.ready();
  const i = feed.index;
  return JSON.parse(
    JSON.stringify({
      run: i.run,
      traces: [...i.traces],
      pending: [...i.pending.keys()],
      settled: i.settled.map((t) => t.traceId),
      failed: i.failedTraces,
      counts: [...i.rewardCounts],
      episodes: [...i.episodes.values()],
      returns: [...i.episodes.keys()].map((n) => i.episodeReturn(n)),
      rewards: i.rewards,
      logged: i.loggedRewards,
      violations: i.violations,
      events: i.events,
      last: i.lastTime,
    }),
  ) as unknown;
}

/** The index as read from events.jsonl alone: the folder copied without its index (a writer may still hold the original). */
async function scannedIndexOf(dir: string): Promise<unknown> {
  return indexOf(await copyRun(dir, 'index-scan-', false));
}

/** Bytes of events.jsonl the index file covers (without it, the events are read). */
async function covered(dir: string): Promise<number> {
  const handle = await open(path.join(dir, RUN_FILES.index), 'r');
  try {
    return (await readIndexFile(handle, undefined, (await stat(path.join(dir, RUN_FILES.events))).size))?.covered ?? 0;
  } finally {
    await handle.close();
  }
}

async function copyRun(dir: string, prefix: string, withIndex = true): Promise<string> {
  const to = await tmp.dir(prefix);
  for (const name of ['run.json', 'states.jsonl', 'rewards.jsonl', 'summary.json', RUN_FILES.events, ...(withIndex ? [RUN_FILES.index] : [])]) {
    await copyFile(path.join(dir, name), path.join(to, name)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }
  return to;
}

describe('events.index', async () => {
  // Delayed rewards (llm_score arrives after its step settled) and, in buggy, every kind of failure:
  // crashes, timeouts, schema violations, a blocked event loop.
  const runs: Record<string, string> = {};
  for (const [env, episodes, maxSteps] of [['weather', 6, 6], ['buggy', 4, 4]] as const) {
    const run = await Run.prepare({ env: `fixtures/${env}`, episodes, concurrency: 3, maxSteps, out: await tmp.dir(`index-${env}-`), toolOptions: { latency_scale: 0.01 } });
    await run.execute();
    runs[env] = run.dir as string;
  }

  it('replays to the same index as reading every event, covering the whole events log', async () => {
    for (const [env, dir] of Object.entries(runs)) {
      const size = (await stat(path.join(dir, RUN_FILES.events))).size;
      expect(await covered(dir), env).toBe(size);
      const replayed = await indexOf(dir);
      expect(replayed, env).toEqual(await scannedIndexOf(dir));
      expect((replayed as { events: number }).events, env).toBeGreaterThan(50);
    }
    const buggy = (await indexOf(runs['buggy'] as string)) as { failed: number; violations: unknown[] };
    expect(buggy.failed).toBeGreaterThan(0);
    expect(buggy.violations.length).toBeGreaterThan(0);
  });

  it("gives each episode's return as agent export counts it, the delayed values in", async () => {
    const dir = runs['weather'] as string;
    await using feed = await FolderFeed.open(dir, { follow: false });
    await feed.ready();
    const exported = new Map((await exportSteps(dir, { state: 'none' })).map((r) => [r.episode, r.episode_return]));
    expect(exported.size).toBe(6);
    for (const [episode, value] of exported) expect(feed.index.episodeReturn(episode), `episode ${episode}`).toEqual({ value, pending: 0 });
    // The judge's values landed after the steps settled: the return is not the episode's value at its end.
    expect([...exported].some(([episode, value]) => value !== feed.index.episodes.get(episode)?.reward)).toBe(true);
  });

  it('names every trace by its position, also in delayed rewards after its step settled: a replay never looks one up by id', async () => {
    const lookups = vi.spyOn(RunIndex.prototype, 'trace');
    try {
      await using feed = await FolderFeed.open(runs['weather'] as string, { follow: false });
      await feed.ready();
      const delayed = feed.index.rewards.filter((r) => r.source === 'llm_score' && r.status === 'arrived');
      expect(delayed.length).toBeGreaterThan(10);
      expect(lookups).not.toHaveBeenCalled();
      // By id the rows are there all the same (the map is built on the first lookup).
      for (const r of delayed) expect(feed.index.trace(r.traceId)?.rewards).toContain(r);
    } finally {
      lookups.mockRestore();
    }
  });

  it('a torn index, or one ahead of its events log, is replayed as far as both go and the rest is read', async () => {
    const dir = runs['weather'] as string;
    const index = await readFile(path.join(dir, RUN_FILES.index));
    const events = await readFile(path.join(dir, RUN_FILES.events));
    for (const cut of [0, 5, 8, 9, Math.floor(index.length / 3), index.length - 1]) {
      const copy = await copyRun(dir, 'index-torn-');
      await truncate(path.join(copy, RUN_FILES.index), cut);
      expect(await indexOf(copy), `index cut at ${cut}`).toEqual(await indexOf(dir));
    }
    // The process died mid-line: the events log ends in a torn line its index already has a record for.
    for (const cut of [Math.floor(events.length / 2), events.length - 7]) {
      const copy = await copyRun(dir, 'index-ahead-');
      await truncate(path.join(copy, RUN_FILES.events), cut);
      expect(await covered(copy)).toBeLessThanOrEqual(cut);
      expect(await indexOf(copy), `events cut at ${cut}`).toEqual(await scannedIndexOf(copy));
    }
  });

  it('an index of another format is ignored, and one that stops making sense is replayed up to there', async () => {
    const dir = runs['buggy'] as string;
    const expected = await indexOf(dir);
    const other = await copyRun(dir, 'index-other-');
    await writeFile(path.join(other, RUN_FILES.index), 'not an index at all\n');
    expect(await indexOf(other)).toEqual(expected);
    const broken = await copyRun(dir, 'index-broken-');
    const bytes = await readFile(path.join(broken, RUN_FILES.index));
    const at = Math.floor(bytes.length / 2);
    // An unknown record kind where records continue: the reader stops there and reads the events from that point.
    await writeFile(path.join(broken, RUN_FILES.index), Buffer.concat([bytes.subarray(0, at), Buffer.from([0xee, 1, 2, 3])]));
    expect(await covered(broken)).toBeLessThan((await stat(path.join(broken, RUN_FILES.events))).size);
    expect(await indexOf(broken)).toEqual(expected);
  });

  it('a run resumed after a crash goes on with its index: the torn tail cut, what it lacked read from the events', async () => {
    const source = runs['weather'] as string;
    const lines = (await readFile(path.join(source, RUN_FILES.events), 'utf8')).split('\n').filter(Boolean);
    const events = lines.map((l) => {
      const { event_seq: _, ...event } = JSON.parse(l) as RunEvent & { event_seq: number };
      return event as RunEvent;
    });
    const manifest = JSON.parse(await readFile(path.join(source, 'run.json'), 'utf8')) as object;
    const half = Math.floor(events.length / 2);
    for (const [name, tearIndex] of [['index torn more than the events', true], ['events torn', false]] as const) {
      const out = await tmp.dir('index-resume-');
      const first = await RunWriter.create(out, 'r1', manifest);
      for (const e of events.slice(0, half)) first.write(e);
      await first[Symbol.asyncDispose]();
      const dir = path.join(out, 'r1');
      const index = path.join(dir, RUN_FILES.index);
      if (tearIndex) await truncate(index, Math.floor((await stat(index)).size * 0.6));
      else await truncate(path.join(dir, RUN_FILES.events), (await stat(path.join(dir, RUN_FILES.events))).size - 5);
      await using second = await RunWriter.reopen(out, 'r1', manifest);
      for (const e of events.slice(half)) second.write(e);
      await second.finish({});
      await copyFile(path.join(source, 'states.jsonl'), path.join(dir, 'states.jsonl'));
      expect(await covered(dir), name).toBe((await stat(path.join(dir, RUN_FILES.events))).size);
      const replayed = (await indexOf(dir)) as { events: number };
      expect(replayed, name).toEqual(await scannedIndexOf(dir));
      expect(replayed.events, name).toBe(tearIndex ? events.length : events.length - 1);
    }
  });

  it('a folder still being written: its index lags the events, and what it lacks is read from them', async () => {
    const source = runs['weather'] as string;
    const manifest = JSON.parse(await readFile(path.join(source, 'run.json'), 'utf8')) as object;
    const events = (await readFile(path.join(source, RUN_FILES.events), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const { event_seq: _, ...event } = JSON.parse(l) as RunEvent & { event_seq: number };
        return event as RunEvent;
      });
    const out = await tmp.dir('index-live-');
    await using writer = await RunWriter.create(out, 'live', manifest);
    const dir = path.join(out, 'live');
    await copyFile(path.join(source, 'states.jsonl'), path.join(dir, 'states.jsonl'));
    const half = Math.floor(events.length / 2);
    for (const e of events.slice(0, half)) writer.write(e);
    await writer.drained();
    await new Promise((r) => setTimeout(r, 50));
    const size = (await stat(path.join(dir, RUN_FILES.events))).size;
    expect(size).toBeGreaterThan(0);
    expect(await covered(dir)).toBeLessThan(size);
    const live = (await indexOf(dir)) as { events: number };
    expect(live).toEqual(await scannedIndexOf(dir));
    expect(live.events).toBe(half);
    for (const e of events.slice(half)) writer.write(e);
    await writer.finish({});
    expect(await covered(dir)).toBe((await stat(path.join(dir, RUN_FILES.events))).size);
    expect(await indexOf(dir)).toEqual(await scannedIndexOf(dir));
  });

  it('a run folder written before the index has one from its first resume, the old events as a gap', async () => {
    const dir = await copyRun(runs['weather'] as string, 'index-old-');
    await rm(path.join(dir, RUN_FILES.index));
    const out = path.dirname(dir);
    const manifest = JSON.parse(await readFile(path.join(dir, 'run.json'), 'utf8')) as object;
    await using writer = await RunWriter.reopen(out, path.basename(dir), manifest);
    writer.write({ type: 'notice', time: Date.now(), code: 'TEST', message: 'resumed' });
    await writer.finish({});
    expect(await covered(dir)).toBe((await stat(path.join(dir, RUN_FILES.events))).size);
    expect(await indexOf(dir)).toEqual(await scannedIndexOf(dir));
  });
});
