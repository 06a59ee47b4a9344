/** The benchmark page stays legible from a handful of tasks to a thousand, and from 3 tools to 25. */
import { describe, expect, it } from 'vitest';
import { renderHtmlReport } from './html-report.js';
import type { BenchmarkReport } from './report.js';
import { syntheticReport } from './report-fixture.js';

function report(tasks: number, reward: (i: number) => number, usd?: number): BenchmarkReport {
  return syntheticReport(tasks, { trial: (i) => ({ success: i % 2 === 0, reward: reward(i), ...(usd !== undefined ? { cost: { usd, tool_usd: 0, input_tokens: 1, output_tokens: 1 } } : {}) }) });
}

describe('renderHtmlReport', () => {
  it('names few tasks on the axis, and hides a thousand names (listing the failed ones instead)', async () => {
    const few = await renderHtmlReport(report(8, (i) => i), { a: [1, 2] });
    expect(few).not.toContain('failed ones listed below');
    expect(few).toContain('task-7');
    const many = await renderHtmlReport(report(1_000, (i) => i % 7), { a: [1, 2] });
    expect(many).toContain('1000 tasks, by share of trials passed (failed ones listed below)');
    expect(many).toContain('<td>task-999</td>');
  });

  it('draws a reward histogram only when rewards differ, and the cost when calls are priced', async () => {
    expect(await renderHtmlReport(report(10, () => 0), {})).toContain("every episode's reward is 0 (10 episodes)");
    const drawn = await renderHtmlReport(report(10, (i) => i, 0.002), {});
    expect(drawn).not.toContain('every episode');
    expect(drawn).not.toContain('no priced calls');
    expect(drawn.match(/<svg/g)).toHaveLength(3);
  });

  it('gives up to 20 tools a colour each, and the rest one line', async () => {
    const latencies = Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`update_reservation_${String(i).padStart(2, '0')}`, Array.from({ length: 30 - i }, (_, k) => k + 1)]));
    const html = await renderHtmlReport(report(4, (i) => i), latencies);
    expect(html).toContain('other (6 tools)');
    // Long tool names stand whole in the legend.
    expect(html).toContain('update_reservation_00');
    expect(html).not.toMatch(/update_reservation…/);
  });
});
