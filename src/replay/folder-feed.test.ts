/** A run folder as the debug console reads it: indexed, rebuilt, followed while written. */
import { appendFile, copyFile, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { randomPolicy, Run, type JsonValue, type Policy } from '../index.js';
import { scratch } from '../../commands/testing.js';
import { FolderFeed } from './folder-feed.js';
import { inspectState } from './inspect.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

describe('FolderFeed', async () => {
  const seen = new Map<string, JsonValue>();
  const watching: Policy = (obs, ctx) => {
    seen.set(`${obs.episode}:${obs.step}`, obs.state);
    return randomPolicy(obs, ctx);
  };
  const run = await Run.prepare({ env: 'fixtures/weather', episodes: 4, concurrency: 2, maxSteps: 5, out: await tmp.dir('feed-'), policy: watching, toolOptions: { latency_scale: 0.01 } });
  await run.execute();
  const dir = run.dir as string;
  const steps = (await readFile(path.join(dir, 'trajectories.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { episode: number; step: number; seq_before: number; trace_id: string; reward: number });
  const events = (await readFile(path.join(dir, 'events.jsonl'), 'utf8')).split('\n').filter(Boolean);

  it('indexes every trace, episode and reward of a finished run', async () => {
    await using feed = await FolderFeed.open(dir, { follow: false });
    await feed.ready();
    const index = feed.index;
    expect(feed.status().phase).toBe('finished');
    expect(index.events).toBe(events.length);
    expect(index.run).toMatchObject({ env: 'weather', status: 'completed', episodes: 4 });
    expect(index.traces.length).toBe(steps.length);
    expect(index.pending.size).toBe(0);
    expect(index.settled.map((t) => t.traceId).sort()).toEqual(steps.map((s) => s.trace_id).sort());
    expect([...index.episodes.values()].map((e) => e.steps)).toEqual([5, 5, 5, 5]);
    // Two sources per step (api_latency now, llm_score later): every one arrived.
    expect(index.rewards).toHaveLength(steps.length * 2);
    expect(index.rewardCounts.get('llm_score')).toMatchObject({ arrived: steps.length, pending: 0 });
    for (const t of index.settled) expect(t).toMatchObject({ status: 'resolved', attempts: 1, step: expect.any(Number) });
  });

  it('rebuilds an episode at every seq equal to the states the policy saw live, and to inspectState', async () => {
    await using feed = await FolderFeed.open(dir, { follow: false });
    await feed.ready();
    for (const s of steps) {
      const h = await feed.episodeHistory(s.episode);
      const position = h.commits.filter((c) => c.seq <= s.seq_before).length;
      expect(h.states[position], `episode ${s.episode} step ${s.step}`).toEqual(seen.get(`${s.episode}:${s.step - 1}`));
      expect(h.states[position]).toEqual((await inspectState(dir, s.episode, { seq: s.seq_before })).state);
    }
    const ep0 = await feed.episodeEvents(0);
    expect(ep0[0]).toMatchObject({ type: 'episode_started', episode: 0 });
    expect(ep0.filter((e) => e.type === 'state_committed').length).toBe((await feed.episodeHistory(0)).commits.length);
  });

  it('follows a folder still being written, waiting for a torn last line to end', async () => {
    const live = await tmp.dir('feed-follow-');
    await copyFile(path.join(dir, 'run.json'), path.join(live, 'run.json'));
    await copyFile(path.join(dir, 'states.jsonl'), path.join(live, 'states.jsonl'));
    // Cut at the first line past the middle where a trace is in flight (which lines those are depends on timing).
    const inFlight = (n: number): number => events.slice(0, n).reduce((k, l) => k + (l.includes('"type":"dispatched"') ? 1 : l.includes('"type":"trace_settled"') ? -1 : 0), 0);
    let half = Math.floor(events.length / 2);
    while (inFlight(half) === 0) half++;
    const torn = events[half] as string;
    await writeFile(path.join(live, 'events.jsonl'), `${events.slice(0, half).join('\n')}\n${torn.slice(0, 20)}`);
    await using feed = await FolderFeed.open(live, { pollMs: 5 });
    await feed.ready();
    expect(feed.status().phase).toBe('following');
    expect(feed.index.events).toBe(half);
    expect(feed.index.pending.size).toBeGreaterThan(0);
    await appendFile(path.join(live, 'events.jsonl'), `${torn.slice(20)}\n${events.slice(half + 1).join('\n')}\n`);
    await vi.waitFor(() => expect(feed.index.events).toBe(events.length), { timeout: 5_000, interval: 5 });
    expect(feed.index.pending.size).toBe(0);
    expect(feed.status().phase).toBe('finished');
  });

  it('refuses a folder that is not a run with a typed error', async () => {
    await expect(FolderFeed.open(path.join(dir, 'nope'))).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringContaining('is not a run folder') });
  });

  it("records a schema violation with its pointer and the offending value (a tool's patch breaking the state schema)", async () => {
    const doubling: Policy = () => ({ name: 'double_score', params: { points: 80 } });
    const bad = await Run.prepare({ env: 'fixtures/buggy', episodes: 1, maxSteps: 2, out: await tmp.dir('feed-buggy-'), policy: doubling });
    await bad.execute();
    await using feed = await FolderFeed.open(bad.dir as string, { follow: false });
    await feed.ready();
    expect(feed.index.violations).toHaveLength(2);
    expect(feed.index.violations[0]).toMatchObject({ kind: 'patch', code: 'STATE_INVALID', traceId: 'ep-0:1', action: 'double_score', pointer: '/score', value: 160, message: expect.stringContaining('100') });
    expect(feed.index.failedTraces).toBe(2);
  });
});
