/** `agent debug --attach`: a live run's event stream indexed as it comes, states served by the run. */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { randomPolicy, Run, type Policy } from '../index.js';
import { scratch } from '../../commands/testing.js';
import { AttachFeed, attachUrl } from './attach-feed.js';
import { FolderFeed } from './folder-feed.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

describe('AttachFeed', () => {
  it('indexes a live run from its stream and rebuilds its episodes like the folder does', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    // Episode 1 waits before its second step, with episode 0 finished, until the test has looked.
    const policy: Policy = async (obs, ctx) => {
      if (obs.episode === 1 && obs.step === 1) await held;
      return randomPolicy(obs, ctx);
    };
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: 2, concurrency: 1, maxSteps: 4, out: await tmp.dir('attach-'), port: 0, policy, toolOptions: { latency_scale: 0.01 } });
    const waiting = new Promise<void>((r) => run.events.on('trace_settled', (e) => e.episode === 1 && r()));
    const done = run.execute();
    await waiting;
    // Attached by its folder: server.json gives the URL and the token.
    const feed = await AttachFeed.connect(run.dir as string);
    try {
      expect(feed.status().phase).toBe('live');
      await vi.waitFor(() => expect(feed.index.episodes.get(0)?.reason).toBe('max_steps'), { timeout: 5_000, interval: 5 });
      expect(feed.index.run).toMatchObject({ env: 'weather', status: 'running' });
      expect(feed.index.episodes.get(1)).toBeDefined();
      const live = await feed.episodeHistory(0);
      release();
      await done;
      await using folder = await FolderFeed.open(run.dir as string, { follow: false });
      await folder.ready();
      const after = await folder.episodeHistory(0);
      expect(live.states).toEqual(after.states);
      expect(live.commits.map((c) => c.seq)).toEqual(after.commits.map((c) => c.seq));
      // The run is over and its server closed: the feed says so and keeps trying.
      await vi.waitFor(() => expect(feed.status().phase).toBe('reconnecting'), { timeout: 5_000, interval: 5 });
      expect(feed.index.run?.status).toBe('completed');
    } finally {
      release();
      await feed[Symbol.asyncDispose]();
    }
  });

  it('says within seconds, with a typed error, when nothing listens at the address', async () => {
    await expect(AttachFeed.connect('127.0.0.1:1')).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringContaining('cannot attach to 127.0.0.1:1'), hint: expect.stringContaining('--port 1') });
  });

  it('reads an address as a port, host:port or URL', () => {
    expect(attachUrl('7070').href).toBe('http://127.0.0.1:7070/');
    expect(attachUrl('localhost:7070').href).toBe('http://localhost:7070/');
    expect(attachUrl('http://127.0.0.1:7070').port).toBe('7070');
    expect(() => attachUrl('127.0.0.1')).toThrow(/names no port/);
  });
});
