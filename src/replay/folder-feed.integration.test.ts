/** The debug console's feed on a durable run's folder (Redis store): histories come from the archived history/, equal to the states seen live. */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { randomPolicy, Run, type JsonValue, type Policy } from '../index.js';
import { scratch } from '../../commands/testing.js';
import { sharedRedisAvailable, TEST_REDIS_URL } from '../state/redis-testing.js';
import { FolderFeed } from './folder-feed.js';

const available = await sharedRedisAvailable('the durable-run debug feed test');
const tmp = scratch();
afterAll(() => tmp.cleanup());

describe.runIf(available)('FolderFeed on a durable run', () => {
  it('rebuilds every episode from its archived history, equal to the states the policy saw', async () => {
    const seen = new Map<string, JsonValue>();
    const watching: Policy = (obs, ctx) => {
      seen.set(`${obs.episode}:${obs.step}`, obs.state);
      return randomPolicy(obs, ctx);
    };
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: 3, concurrency: 2, maxSteps: 4, out: await tmp.dir('feed-durable-'), store: TEST_REDIS_URL, policy: watching, toolOptions: { latency_scale: 0.01 } });
    await run.execute();
    const dir = run.dir as string;
    expect((await readdir(path.join(dir, 'history'))).sort()).toEqual(['ep-0.jsonl.gz', 'ep-1.jsonl.gz', 'ep-2.jsonl.gz']);
    await using feed = await FolderFeed.open(dir, { follow: false });
    await feed.ready();
    expect(feed.index.traces.length).toBe(12);
    for (let episode = 0; episode < 3; episode++) {
      const h = await feed.episodeHistory(episode);
      expect(h.commits.map((c) => c.seq)).toEqual([1, 2, 3, 4]);
      for (let step = 0; step < 4; step++) expect(h.states[step], `episode ${episode} step ${step}`).toEqual(seen.get(`${episode}:${step}`));
    }
  });
});
