/**
 * The web console in a real browser (headless Chromium, scripts/chromium.ts): every view renders
 * on a recorded run and on a live one; a trace clicks through to its timeline and on to the state
 * at its seq, which equals `agent debug --state`; a violation opens the state with its field
 * marked; a τ-bench benchmark run (162 steps, 3 MB states) shows a reservation's field history;
 * and the page asks nothing of any server but its own.
 */
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch } from '../../commands/testing.js';
import { chromiumOrSkip, withPage, type Page } from '../../scripts/chromium.js';
import { ConsoleServer, FolderFeed, inspectState, randomPolicy, Run, runBenchmark, type Policy } from '../internal.js';

const browser = chromiumOrSkip();
if ('skip' in browser) console.warn(browser.skip);
const tmp = scratch();
afterAll(() => tmp.cleanup());
const VIEWPORT = { width: 1400, height: 900 };

/** The console on a finished run folder, a page open on it. */
async function onFolder<T>(bin: string, dir: string, fn: (page: Page, origin: string) => Promise<T>): Promise<T> {
  await using feed = await FolderFeed.open(dir, { follow: false });
  await using server = await ConsoleServer.start({ feed, runDir: dir });
  return await withPage(bin, VIEWPORT, async (page) => {
    await page.goto(server.url);
    await page.waitFor(`document.querySelector('.feed')?.dataset.phase === 'finished'`, 'the feed to be read');
    return fn(page, `http://127.0.0.1:${server.port}`);
  });
}

// In parentheses: `a ?? '' === 'x'` would read as `a ?? ('' === 'x')`, true as soon as the element has any text.
const text = (selector: string): string => `(document.querySelector(${JSON.stringify(selector)})?.textContent ?? '')`;
const view = (name: string): string => `document.querySelector('main')?.dataset.view === ${JSON.stringify(name)}`;

function onlyFrom(page: Page, origin: string): void {
  const foreign = page.requests.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('data:'));
  expect(foreign, 'requests off the console server').toEqual([]);
  expect(page.requests.some((u) => u.startsWith(`${origin}/api/`))).toBe(true);
}

describe.skipIf('skip' in browser)('the web console in a browser', () => {
  const bin = 'bin' in browser ? browser.bin : '';

  it('renders every view of a recorded run, and clicks from a trace to its timeline to the state at its seq', async () => {
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: 4, concurrency: 2, maxSteps: 5, out: await tmp.dir('web-'), toolOptions: { latency_scale: 0.01 } });
    await run.execute();
    const dir = run.dir as string;
    const steps = (await readFile(path.join(dir, 'trajectories.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { episode: number; trace_id: string; state_seq: number });
    const target = steps.find((s) => s.episode === 1 && s.trace_id.endsWith(':3')) as (typeof steps)[number];
    await onFolder(bin, dir, async (page, origin) => {
      await page.waitFor(`${text('[data-stat=steps]')} === '${steps.length}'`, 'the overview to count every step');
      await page.waitFor(`document.querySelectorAll('tr[data-episode]').length === 4`, 'the episodes table (fetched after the overview)');

      await page.click('[data-tab=traces]');
      await page.waitFor(`document.querySelector('[data-total]')?.dataset.total === '${steps.length}'`, 'the traces table');
      await page.click(`.row[data-trace="${target.trace_id}"]`);
      await page.waitFor(view('timeline'), 'the timeline to open');
      await page.waitFor(`document.querySelector('.details')?.dataset.selected === '${target.trace_id}'`, 'the trace selected in the timeline');
      expect(await page.evaluate<number>(`document.querySelectorAll('.barbox').length`)).toBe(steps.filter((s) => s.episode === 1).length);
      // Its bar is a few pixels wide at this scale, its reward marker drawn over its middle: the row is what hovers it.
      await page.hover(`.barbox[data-trace="${target.trace_id}"]`);
      await page.waitFor(`document.querySelector('.tooltip')?.dataset.tooltip === '${target.trace_id}'`, 'the tooltip of the hovered bar');
      expect(await page.evaluate<string>(text('.tooltip'))).toMatch(/dispatched \+[\d.]+ m?s.*settled after [\d.]+ m?s/s);

      await page.click('[data-open-state]');
      await page.waitFor(view('state'), 'the state explorer to open');
      await page.waitFor(`document.querySelector('[data-seq]')?.dataset.seq === '${target.state_seq}'`, 'the state at the trace seq');
      await page.click('.filters input[type=checkbox]');
      const shown = JSON.parse(await page.waitFor<string>(`document.querySelector('[data-raw-state]')?.textContent`, 'the raw state')) as unknown;
      expect(shown).toEqual((await inspectState(dir, 1, { seq: target.state_seq })).state);

      await page.click('[data-tab=rewards]');
      await page.waitFor(`document.querySelectorAll('.source').length === 2`, 'both reward sources');
      expect(await page.evaluate<string>(text('.source[data-source=api_latency] [data-status=arrived]'))).toBe(`arrived ${steps.length}`);
      await page.click('[data-tab=validation]');
      await page.waitFor(`${text('.validation')}.includes('no schema violation')`, 'the validation view');
      onlyFrom(page, origin);
    });
  });

  it('opens a violation in the state explorer with the offending field marked', async () => {
    const doubling: Policy = () => ({ name: 'double_score', params: { points: 80 } });
    const run = await Run.prepare({ env: 'fixtures/buggy', episodes: 1, maxSteps: 2, out: await tmp.dir('web-buggy-'), policy: doubling });
    await run.execute();
    await onFolder(bin, run.dir as string, async (page) => {
      await page.click('[data-tab=validation]');
      await page.waitFor(`document.querySelector('[data-violation="/score"]')`, 'the violation row');
      expect(await page.evaluate<string>(text('[data-violation="/score"]'))).toMatch(/STATE_INVALID.*double_score.*160/);
      await page.click('[data-violation="/score"]');
      await page.waitFor(view('state'), 'the state explorer');
      await page.waitFor(`document.querySelector('.node.invalid')?.dataset.pointer === '/score'`, 'the invalid field marked in the tree');
      await page.waitFor(`document.querySelector('.field-history')?.dataset.field === '/score'`, "the field's history");
    });
  });

  it("shows a τ-bench benchmark run (162 steps, 3 MB states) and a reservation's field history", async () => {
    const out = await tmp.dir('web-tau-');
    const report = await runBenchmark({ suite: 'tau-bench/airline', policy: 'gold', out });
    const dir = report.run_dir;
    expect((await stat(path.join(dir, 'states.jsonl'))).size).toBeGreaterThan(2_500_000);
    const steps = (await readFile(path.join(dir, 'trajectories.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { episode: number; trace_id: string; action: string; state_seq: number; params: { reservation_id?: string } });
    expect(steps).toHaveLength(162);
    const cancel = steps.find((s) => s.action === 'cancel_reservation') as (typeof steps)[number];
    const pointer = `/reservations/${cancel.params.reservation_id as string}/status`;
    await onFolder(bin, dir, async (page, origin) => {
      await page.waitFor(`document.querySelectorAll('.benchmark .cell.ok').length === 50`, "the benchmark's 50 tasks");
      await page.click('[data-tab=traces]');
      await page.waitFor(`document.querySelector('[data-total]')?.dataset.total === '162'`, 'all 162 traces');
      await page.click(`.row[data-trace="${cancel.trace_id}"]`);
      await page.waitFor(`document.querySelector('[data-open-state]')`, 'the cancel step in the timeline');
      await page.click('[data-open-state]');
      await page.waitFor(`document.querySelector('[data-seq]')?.dataset.seq === '${cancel.state_seq}'`, 'the state after the cancellation');
      // The commit's diff names the reservation it rewrote: clicking it opens the reservation's history, in the tree among 2,000.
      const reservation = `/reservations/${cancel.params.reservation_id as string}`;
      const row = await page.evaluate<number>(`[...document.querySelectorAll('.diff tr')].findIndex((r) => r.textContent.includes(${JSON.stringify(reservation)})) + 1`);
      expect(row).toBeGreaterThan(0);
      await page.click(`.diff tr:nth-child(${row})`);
      await page.waitFor(`document.querySelector('.field-history')?.dataset.field === ${JSON.stringify(reservation)}`, "the reservation's history");
      await page.waitFor(`document.querySelector('.node.selected')?.dataset.pointer === ${JSON.stringify(reservation)}`, 'the reservation selected in the tree');
      await page.click(`.node[data-pointer="${reservation}"]`);
      await page.click(`.node[data-pointer="${pointer}"]`);
      await page.waitFor(`document.querySelector('.field-history')?.dataset.field === ${JSON.stringify(pointer)}`, "the reservation status's history");
      const changes = await page.evaluate<string[]>(`[...document.querySelectorAll('.field-history tr')].map((r) => r.textContent)`);
      expect(changes).toHaveLength(2);
      // τ-bench keeps no status on a live reservation: it appears with the cancellation.
      expect(changes[0]).toMatch(/seq 0.*initial.*\(absent\)/);
      expect(changes[1]).toContain(`seq ${cancel.state_seq}`);
      expect(changes[1]).toContain('cancelled');
      onlyFrom(page, origin);
    });
  });

  it('follows a live run at / of its run server', async () => {
    // One episode at a time, held at two gates: the page must show the steps settled at each while the run is live.
    const gates = [0, 1].map(() => {
      let open: () => void = () => undefined;
      const opened = new Promise<void>((resolve) => (open = resolve));
      return { open, opened };
    });
    const policy: Policy = async (obs, ctx) => {
      if (obs.episode === 1) await gates[0]?.opened;
      if (obs.episode === 5) await gates[1]?.opened;
      return randomPolicy(obs, ctx);
    };
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: 6, concurrency: 1, maxSteps: 4, out: await tmp.dir('web-live-'), policy, port: 0, toolOptions: { latency_scale: 0.01 } });
    const started = new Promise<string>((resolve) => run.events.on('run_started', (e) => resolve(e.url as string)));
    const done = run.execute();
    try {
      const url = await started;
      await withPage(bin, VIEWPORT, async (page) => {
        await page.goto(`${url}/#token=${run.server?.token ?? ''}`);
        await page.waitFor(`document.querySelector('.feed')?.dataset.phase === 'following'`, 'the page to follow the run');
        // The token left the address bar once the page had it.
        expect(await page.evaluate<string>('location.hash')).toBe('');
        await page.waitFor(`${text('[data-stat=steps]')} === '4'`, 'episode 0 settled, live');
        expect(await page.evaluate<string>(text('.overview'))).toContain('running');
        gates[0]?.open();
        await page.waitFor(`${text('[data-stat=steps]')} === '20'`, 'episodes 1 to 4 settled, live');
        await page.waitFor(`${text('[data-stat=episodes]')}.startsWith('5 /')`, 'five episodes finished, live');
        await page.click('[data-tab=timeline]');
        await page.waitFor(`document.querySelectorAll('.barbox.resolved').length === 4`, 'episode 0 on the timeline');
        await page.click('[data-tab=state]');
        await page.waitFor(`document.querySelector('.tree')`, "episode 0's state");
        onlyFrom(page, url);
      });
      // The page is open; the run's data is not, without the token.
      expect((await fetch(`${url}/`)).status).toBe(200);
      expect((await fetch(`${url}/api/overview`)).status).toBe(401);
    } finally {
      for (const g of gates) g.open();
      await done;
    }
  });
});
