/**
 * The web console (`agent debug --web`, and `/` of `agent run --port`) in headless Chromium:
 * 1. A run folder of ~1M events (the weather env, 13,200 episodes of 10 steps), opened cold: the
 *    console server starts and the page loads at once; times until the page first shows the run
 *    (while the folder is still being indexed), until indexing is done, until the traces table
 *    shows its middle row, and until a middle episode's state is drawn. Target: interactive ≤ 3 s.
 * 2. A live run at ~1,000 steps/s followed at `/` of its run server: how many times a second the
 *    page redraws its counts, and how far behind the run it is (events the run emitted that the
 *    page does not show yet, sampled twice a second). Target: ≥ 10 updates/s, never falling behind.
 * Needs Chromium (scripts/chromium.ts).
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromiumOrSkip, withPage } from '../scripts/chromium.js';
import { ConsoleServer, FolderFeed, Run } from '../src/internal.js';

const browser = chromiumOrSkip();
if ('skip' in browser) {
  console.log(`web console bench: ${browser.skip}`);
  process.exit(0);
}
const VIEWPORT = { width: 1400, height: 900 };
const s = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
const out = await mkdtemp(path.join(os.tmpdir(), 'web-bench-'));
try {
  // WEB_BENCH_RUN=<run folder> reuses a folder written before (a million events take a minute to write).
  let dir = process.env['WEB_BENCH_RUN'] ?? '';
  if (dir === '') {
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: Number(process.env['DEBUG_BENCH_EPISODES'] ?? 13_200), concurrency: 64, maxSteps: 10, out, toolOptions: { latency_scale: 0.01 } });
    await run.execute();
    dir = run.dir as string;
  }
  const lines = Number(execFileSync('wc', ['-l', path.join(dir, 'events.jsonl')]).toString().trim().split(' ')[0]);

  await withPage(browser.bin, VIEWPORT, async (page) => {
    // Warm the browser's own start-up (not ours) on a blank page first.
    await page.goto('about:blank');
    const t0 = performance.now();
    await using feed = await FolderFeed.open(dir, { follow: false });
    await using server = await ConsoleServer.start({ feed, runDir: dir });
    await page.goto(server.url);
    await page.waitFor(`document.querySelector('[data-stat=steps]')`, 'the overview', 30_000);
    const shown = performance.now() - t0;
    // Usable while indexing: the traces table answers with what is indexed so far.
    await page.click('[data-tab=traces]');
    await page.waitFor(`document.querySelectorAll('.row').length > 10`, 'the traces table', 30_000);
    const interactive = performance.now() - t0;
    const phaseThen = await page.evaluate<string>(`document.querySelector('.feed')?.dataset.phase ?? ''`);
    await page.waitFor(`document.querySelector('.feed')?.dataset.phase === 'finished'`, 'the folder indexed', 60_000);
    const indexed = performance.now() - t0;
    const middle = Math.floor(feed.index.traces.length / 2);
    // Scrolled again at every poll: a scroll made while the table was still re-rendering the last
    // rows of the index could be lost (seen once on a loaded machine).
    await page.waitFor(`(() => { const el = document.querySelector('.scroller'); el.scrollTop = el.scrollHeight / 2; return [...document.querySelectorAll('.row')].some((r) => Math.abs(parseFloat(r.style.top) / 26 - ${middle}) < 40); })()`, 'the middle rows', 30_000);
    const scrolled = performance.now() - t0;
    await page.click(`.row`);
    await page.waitFor(`document.querySelector('[data-open-state]')`, 'a trace in the timeline', 30_000);
    await page.click('[data-open-state]');
    await page.waitFor(`document.querySelector('.tree')`, 'the state', 30_000);
    const state = performance.now() - t0;
    console.log(
      `web console on ${lines.toLocaleString('en-US')} events, cold: first view ${s(shown)}, traces table answering ${s(interactive)} (feed ${phaseThen} then) — target interactive ≤ 3 s: ${interactive <= 3_000 ? '✓' : '✗'}; all indexed ${s(indexed)}, the middle of ${feed.index.traces.length.toLocaleString('en-US')} traces ${s(scrolled)}, a state ${s(state)}`,
    );
  });

  // 2. A live run, followed at / of its run server.
  const live = await Run.prepare({ env: 'fixtures/weather', episodes: 1_200, concurrency: 64, maxSteps: 10, out, port: 0, toolOptions: { latency_scale: 0.2 } });
  let emitted = 0;
  live.events.onAny(() => void emitted++);
  const started = new Promise<string>((resolve) => live.events.on('run_started', (e) => resolve(e.url as string)));
  const done = live.execute();
  const url = await started;
  let result = '';
  await withPage(browser.bin, VIEWPORT, async (page) => {
    await page.goto(`${url}/#token=${live.server?.token ?? ''}`);
    await page.waitFor(`document.querySelector('.feed')?.dataset.phase === 'following'`, 'the page following the run');
    await page.evaluate(`(() => { window.__redraws = []; new MutationObserver(() => window.__redraws.push(performance.now())).observe(document.querySelector('.feed'), { subtree: true, childList: true, characterData: true }); })()`);
    const lags: number[] = [];
    const rates: number[] = [];
    let before = { t: performance.now(), steps: 0 };
    for (let i = 0; i < 16; i++) {
      await new Promise((r) => setTimeout(r, 500));
      const shownEvents = Number((await page.evaluate<string>(`document.querySelector('.feed')?.textContent ?? ''`)).replace(/.*· ([\d,]+) events.*/s, '$1').replace(/,/g, ''));
      lags.push(emitted - shownEvents);
      const steps = Number(await page.evaluate<string>(`document.querySelector('[data-stat=steps]')?.textContent ?? '0'`).then((t) => t.replace(/,/g, '')));
      const now = performance.now();
      rates.push(((steps - before.steps) / (now - before.t)) * 1000);
      before = { t: now, steps };
    }
    const redraws = await page.evaluate<number[]>('window.__redraws');
    const span = ((redraws.at(-1) ?? 0) - (redraws[0] ?? 0)) / 1000;
    const perSecond = span > 0 ? (redraws.length - 1) / span : 0;
    lags.sort((a, b) => a - b);
    const rate = rates.slice(1).sort((a, b) => a - b)[Math.floor((rates.length - 1) / 2)] ?? 0;
    const eventsPerStep = emitted / Math.max(1, Number(await page.evaluate<string>(`document.querySelector('[data-stat=steps]')?.textContent ?? '1'`).then((t) => t.replace(/,/g, ''))));
    const lagMs = (n: number): string => `${((n / (rate * eventsPerStep)) * 1000).toFixed(0)} ms`;
    result = `live run at ${rate.toFixed(0)} steps/s: the page redraws ${perSecond.toFixed(1)} times/s (target ≥ 10: ${perSecond >= 10 ? '✓' : '✗'}); behind the run by ${lags[Math.floor(lags.length / 2)]} events (${lagMs(lags[Math.floor(lags.length / 2)] ?? 0)}) at the median, ${lags.at(-1)} (${lagMs(lags.at(-1) ?? 0)}) at most — never growing: ${(lags.at(-1) ?? 0) < rate * eventsPerStep ? '✓' : '✗'}`;
  });
  await done;
  console.log(result);
} finally {
  await rm(out, { recursive: true, force: true });
}
