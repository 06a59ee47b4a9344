/**
 * `agent debug` on a large run:
 * 1. A run folder of ~1M events (the weather env, 13,200 episodes of 10 steps): time to index it
 *    and the resident memory after, in a fresh process each time (median of 3), from the index the
 *    run wrote beside its events (events.index) and, for comparison, from the events alone.
 *    Target: ≤ 1 s (round 3; it was 2 s) and < 300 MB. The console draws its first frame before
 *    indexing ends, showing the progress.
 * 2. The console with 10,000 pending traces, 100 more arriving per frame: time per frame (React,
 *    layout and the terminal write). Target: ≥ 10 fps.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, renameSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { render } from 'ink-testing-library';
import { FolderFeed, Run, RunIndex, type DebugFeed, type IndexedEvent } from '../src/internal.js';
import { DebugConsole } from '../src/ui/debug/debug-console.js';
import { historyOf } from '../src/replay/debug-feed.js';
import { target } from './lib/targets.js';

const out = await mkdtemp(path.join(os.tmpdir(), 'debug-bench-'));
try {
  const t0 = performance.now();
  const run = await Run.prepare({ env: 'fixtures/weather', episodes: Number(process.env['DEBUG_BENCH_EPISODES'] ?? 13_200), concurrency: 64, maxSteps: 10, out, toolOptions: { latency_scale: 0.01 } });
  await run.execute();
  const dir = run.dir as string;
  const lines = Number(execFileSync('wc', ['-l', path.join(dir, 'events.jsonl')]).toString().trim().split(' ')[0]);
  console.log(`run folder: ${lines.toLocaleString('en-US')} events written in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  // Opened by the built package (as users run it; `npm run bench` builds first), in a fresh process each time.
  const built = path.join(import.meta.dirname, '..', 'dist', 'src', 'index.js');
  if (!existsSync(built)) throw new Error('dist/ is missing: run `npm run build` first');
  const probe = `
    const { FolderFeed } = await import(${JSON.stringify(pathToFileURL(built).href)});
    const t0 = performance.now();
    const feed = await FolderFeed.open(process.argv[1], { follow: false });
    await feed.ready();
    const ms = performance.now() - t0;
    console.log(JSON.stringify({ ms, rss: process.memoryUsage().rss, events: feed.index.events }));
    await feed[Symbol.asyncDispose]();`;
  type Open = { ms: number; rss: number; events: number };
  const median = (): { mid: Open; all: Open[] } => {
    const all = [0, 1, 2].map(() => JSON.parse(execFileSync('node', ['--input-type=module', '-e', probe, dir]).toString()) as Open).sort((a, b) => a.ms - b.ms);
    return { mid: all[1] as Open, all };
  };
  const indexFile = path.join(dir, 'events.index');
  const { mid, all } = median();
  console.log(`open ${mid.events.toLocaleString('en-US')} events with the run's index (events.index, ${Math.round(statSync(indexFile).size / 2 ** 20)} MB beside ${Math.round(statSync(path.join(dir, 'events.jsonl')).size / 2 ** 20)} MB of events): ${(mid.ms / 1000).toFixed(2)} s (runs: ${all.map((o) => (o.ms / 1000).toFixed(2)).join(', ')} s), RSS after ${Math.round(mid.rss / 2 ** 20)} MB   ${target('agent debug opens a ~1M-event run', mid.ms / 1000, 's', { atMost: 1 })}; ${target('RSS after opening it', mid.rss / 2 ** 20, 'MB', { atMost: 300 })}`);
  renameSync(indexFile, `${indexFile}.aside`);
  const scanned = median();
  renameSync(`${indexFile}.aside`, indexFile);
  console.log(`the same run without its index (every line of events.jsonl read): ${(scanned.mid.ms / 1000).toFixed(2)} s (runs: ${scanned.all.map((o) => (o.ms / 1000).toFixed(2)).join(', ')} s)`);
  const feed = await FolderFeed.open(dir, { follow: false });
  await feed.ready();
  const h0 = performance.now();
  await feed.episodeHistory(Math.floor(feed.index.episodes.size / 2));
  console.log(`an episode's history (initial state + commits) by offsets: ${(performance.now() - h0).toFixed(1)} ms`);
  await feed[Symbol.asyncDispose]();
} finally {
  await rm(out, { recursive: true, force: true });
}

// 2. Frames with 10k pending traces.
const index = new RunIndex<IndexedEvent>();
const listeners = new Set<() => void>();
const feed: DebugFeed = {
  title: 'bench',
  index,
  status: () => ({ phase: 'live' }),
  onChange: (l) => (listeners.add(l), () => listeners.delete(l)),
  episodeEvents: () => Promise.resolve([]),
  episodeHistory: (episode) => Promise.resolve(historyOf(episode, 'ep-0', {}, [])),
  [Symbol.asyncDispose]: () => Promise.resolve(),
};
let n = 0;
const dispatch = (count: number): void => {
  for (let i = 0; i < count; i++, n++) index.ingest({ type: 'dispatched', time: Date.now(), instance_id: `ep-${n % 500}`, episode: n % 500, trace_id: `ep-${n % 500}:${n}`, action: 'slow_tool', params: {} }, { type: 'dispatched', time: 0 });
};
dispatch(10_000);
// A 120×40 screen redrawn by the console's own 10 fps timer while 100 traces arrive every 100 ms:
// frames actually written per second, and the CPU each one cost.
const app = render(<DebugConsole feed={feed} size={{ columns: 120, rows: 40 }} />);
const arriving = setInterval(() => {
  dispatch(100);
  for (const l of listeners) l();
}, 100);
const before = app.frames.length;
const cpu0 = process.cpuUsage();
const f0 = performance.now();
await new Promise((resolve) => setTimeout(resolve, 3_000));
clearInterval(arriving);
const seconds = (performance.now() - f0) / 1000;
const cpu = process.cpuUsage(cpu0);
const frames = app.frames.length - before;
if (!(app.lastFrame() ?? '').includes('pending')) throw new Error(`the last frame shows no pending traces:\n${app.lastFrame() ?? ''}`);
app.unmount();
const perFrame = (cpu.user + cpu.system) / 1000 / frames;
console.log(`console with ${index.pending.size.toLocaleString('en-US')} pending traces (100 more per 100 ms): ${(frames / seconds).toFixed(1)} frames/s drawn, ${perFrame.toFixed(1)} ms CPU per frame → ${Math.floor(1000 / perFrame)} fps possible (target ≥ 10)`);
