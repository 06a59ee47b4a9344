/**
 * A benchmark against a baseline report (an earlier `benchmark.json`), paired by task and trial:
 * per metric the difference with its 95% interval and whether it is a regression past what is
 * allowed, the paired win rate, and the tasks whose success flipped. The baseline is read and
 * checked before the first episode runs (a missing or foreign file fails at once, not after an
 * hour of episodes); the comparison is saved in the report.
 */
import { readFile } from 'node:fs/promises';
import { AgentError, describeError } from '../../shared/errors.js';
import type { BaselineComparison, BenchmarkReport, MetricComparison, TrialResult } from './report.js';
import { bootstrapMean, pairedDifference, type Estimate } from './stats.js';

/** Higher is better for these; lower for steps. The gate compares what a baseline report has too. */
const DIRECTION: Readonly<Record<string, 1 | -1>> = { success_rate: 1, reward: 1, steps_per_episode: -1 };

/** A baseline benchmark report read from its file, and the regression each metric may show before it counts as one. */
export interface Baseline {
  readonly file: string;
  readonly report: BenchmarkReport;
  /** Allowed drop per metric before the gate fails (default: success_rate 0, the others any). */
  readonly maxRegression: Readonly<Record<string, number>>;
}

const HINT = 'Pass --baseline the benchmark.json of an earlier run.';

/** Read and check a baseline report and the allowed regressions: BAD_USAGE naming what is wrong. */
export async function loadBaseline(file: string, maxRegression: Readonly<Record<string, number>> = {}): Promise<Baseline> {
  for (const m of Object.keys(maxRegression)) if (!(m in DIRECTION)) throw new AgentError('BAD_USAGE', `--max-regression: unknown metric '${m}'`, { hint: `Use one of ${Object.keys(DIRECTION).join(', ')}.` });
  let report: BenchmarkReport;
  try {
    report = JSON.parse(await readFile(file, 'utf8')) as BenchmarkReport;
  } catch (err) {
    throw new AgentError('BAD_USAGE', `cannot read the baseline '${file}': ${describeError(err)}`, { hint: HINT });
  }
  if (typeof report !== 'object' || report === null || !Array.isArray(report.tasks) || typeof report.metrics !== 'object') throw new AgentError('BAD_USAGE', `'${file}' is not a benchmark report (no tasks or metrics)`, { hint: HINT });
  return { file, report, maxRegression };
}

/** Compare `report` with a loaded baseline. */
export function compareReports(report: BenchmarkReport, { file, report: baseline, maxRegression }: Baseline): BaselineComparison {
  const before = new Map(baseline.tasks.map((t) => [t.id, new Map<number, TrialResult>(t.trials.map((x: TrialResult) => [x.trial, x]))]));
  const flipped: BaselineComparison['flipped'][number][] = [];
  const pairsOf = (pick: (t: TrialResult) => number): [number, number][][] =>
    report.tasks.map((t) =>
      t.trials.flatMap((x) => {
        const b = before.get(t.id)?.get(x.trial);
        return b ? [[pick(x), pick(b)] as [number, number]] : [];
      }),
    );
  for (const t of report.tasks) {
    for (const x of t.trials) {
      const b = before.get(t.id)?.get(x.trial);
      if (b && b.success !== x.success) flipped.push({ id: t.id, trial: x.trial, now: x.success, before: b.success });
    }
  }
  const pick: Record<string, (t: TrialResult) => number> = { success_rate: (t) => (t.success ? 1 : 0), reward: (t) => t.reward, steps_per_episode: (t) => t.steps };
  const metrics = Object.entries(DIRECTION).map(([metric, dir]): MetricComparison => {
    const difference = pairedDifference(pairsOf(pick[metric] as (t: TrialResult) => number), report.seed);
    const allowed = maxRegression[metric] ?? (metric === 'success_rate' ? 0 : Infinity);
    // Worse by more than allowed, with the whole interval on the bad side.
    const regression = difference.pairs > 0 && (dir === 1 ? difference.ci_high < -allowed : difference.ci_low > allowed);
    const current = (report.metrics as unknown as Record<string, Estimate>)[metric]?.value ?? 0;
    const base = (baseline.metrics as unknown as Record<string, Estimate>)[metric]?.value ?? 0;
    return { metric, current, baseline: base, difference, allowed, regression };
  });
  const outcomes = pairsOf((t) => (t.success ? 1 : 0)).map((task) => task.map(([now, was]) => (now > was ? 1 : now < was ? 0 : 0.5)));
  const all = outcomes.flat();
  const win_rate = { ...bootstrapMean(outcomes, report.seed + 3), wins: all.filter((x) => x === 1).length, losses: all.filter((x) => x === 0).length, ties: all.filter((x) => x === 0.5).length };
  return { baseline: file, metrics, win_rate, flipped, regressed: metrics.some((m) => m.regression) };
}

/** Compare with a baseline report file, paired by task and trial; `maxRegression` per metric (default 0). */
export async function compareWithBaseline(report: BenchmarkReport, baselineFile: string, maxRegression: Readonly<Record<string, number>> = {}): Promise<BaselineComparison> {
  return compareReports(report, await loadBaseline(baselineFile, maxRegression));
}
