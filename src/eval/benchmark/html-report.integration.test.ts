/**
 * benchmark.html as a browser lays it out: at 8, 50, 115 and 1,000 tasks and with 25 tools, no two
 * labels of a chart overlap, none spills out of its chart, and the page never scrolls sideways.
 * Needs Chromium (see scripts/chromium.ts). To look at the pages, set AGENT_TEST_SHOTS to a folder:
 * a screenshot of each size is written there (tests never write into the checkout).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch } from '../../../commands/testing.js';
import { chromiumOrSkip, withPage } from '../../../scripts/chromium.js';
import { renderHtmlReport } from './html-report.js';
import type { BenchmarkReport } from './report.js';
import { syntheticReport } from './report-fixture.js';

const browser = chromiumOrSkip();
if ('skip' in browser) console.warn(browser.skip);
const tmp = scratch();
const SHOTS = process.env['AGENT_TEST_SHOTS'];
afterAll(() => tmp.cleanup());

/** A report of `tasks` tasks with τ-bench-like names, rewards spread over 0..1 and priced calls. */
function report(tasks: number): BenchmarkReport {
  return syntheticReport(tasks, {
    suite: 'tau-bench airline',
    policy: 'llm:claude-sonnet-4-5',
    trials: 2,
    taskId: (i) => `airline-test-${i}`,
    trial: (i, trial) => ({ success: (i + trial) % 3 !== 0, reward: ((i * 7 + trial) % 10) / 10, cost: { usd: 0.001 * (1 + (i % 13)), tool_usd: 0, input_tokens: 100, output_tokens: 20 } }),
  });
}

const TOOLS = ['book_reservation', 'calculate', 'cancel_reservation', 'get_reservation_details', 'get_user_details', 'list_all_airports', 'search_direct_flight', 'search_onestop_flight', 'send_certificate', 'think', 'transfer_to_human_agents', 'update_reservation_baggages', 'update_reservation_flights', 'update_reservation_passengers', 'respond'];
const latencies = (tools: readonly string[]): Record<string, number[]> => Object.fromEntries(tools.map((t, i) => [t, Array.from({ length: 40 }, (_, k) => 1 + ((k * (i + 3)) % 97))]));

interface Layout {
  readonly svgs: number;
  readonly texts: number;
  readonly overlaps: readonly (readonly [string, string])[];
  readonly outside: readonly string[];
  readonly scrollWidth: number;
}

// In the page: every visible label of every chart, its box against the others of that chart and against the chart's own box.
const LAYOUT = `(() => {
  const boxes = [...document.querySelectorAll('svg text')]
    .filter((t) => t.textContent.trim() !== '' && t.getClientRects().length > 0 && getComputedStyle(t).opacity !== '0')
    .map((t) => ({ text: t.textContent.trim(), r: t.getBoundingClientRect(), svg: t.ownerSVGElement.closest('svg:not(svg svg)') ?? t.ownerSVGElement }));
  const overlaps = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.svg !== b.svg) continue;
    const w = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
    const h = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
    if (w > 1 && h > 1) overlaps.push([a.text, b.text]);
  }
  const outside = boxes.filter(({ r, svg }) => { const s = svg.getBoundingClientRect(); return r.left < s.left - 1 || r.right > s.right + 1 || r.top < s.top - 1 || r.bottom > s.bottom + 1; }).map((b) => b.text);
  return { svgs: document.querySelectorAll('svg').length, texts: boxes.length, overlaps, outside, scrollWidth: document.documentElement.scrollWidth };
})()`;

describe.skipIf('skip' in browser)('benchmark.html in a browser', () => {
  it.each([
    [8, TOOLS.slice(0, 4)],
    [50, TOOLS],
    [115, TOOLS],
    [1_000, [...TOOLS, ...Array.from({ length: 10 }, (_, i) => `update_reservation_extra_${i}`)]],
  ])('%i tasks, %# : no label overlaps another or leaves its chart, no sideways scroll', async (tasks, tools) => {
    const dir = await tmp.dir('bench-html-');
    const file = path.join(dir, `benchmark-${tasks}.html`);
    await writeFile(file, await renderHtmlReport(report(tasks), latencies(tools)));
    const layout = await withPage((browser as { bin: string }).bin, { width: 1280, height: 900 }, async (page) => {
      await page.goto(pathToFileURL(file).href);
      if (SHOTS) {
        await mkdir(SHOTS, { recursive: true });
        await page.screenshot(path.join(SHOTS, `benchmark-${tasks}.png`));
      }
      return page.evaluate<Layout>(LAYOUT);
    });
    expect(layout.svgs).toBeGreaterThanOrEqual(4);
    expect(layout.texts).toBeGreaterThan(20);
    expect({ overlaps: layout.overlaps, outside: layout.outside }).toEqual({ overlaps: [], outside: [] });
    expect(layout.scrollWidth).toBeLessThanOrEqual(1280);
  }, 60_000);
});
