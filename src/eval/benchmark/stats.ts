/**
 * Statistics of a benchmark: bootstrap confidence intervals that resample tasks (trials of one
 * task are not independent), tau-bench's pass^k, percentiles, and the paired difference against a
 * baseline (paired by task and trial). Seeded: the same results give the same intervals.
 */
import { Rng } from '../../shared/rng.js';

/** A rate or mean with its 95% confidence interval. */
export interface Estimate {
  readonly value: number;
  readonly ci_low: number;
  readonly ci_high: number;
}

const RESAMPLES = 2_000;

/** Mean of per-task values (each the mean over its trials) with a 95% bootstrap interval over tasks. */
export function bootstrapMean(perTask: readonly (readonly number[])[], seed: number): Estimate {
  const means = perTask.filter((t) => t.length > 0).map((t) => t.reduce((a, b) => a + b, 0) / t.length);
  if (means.length === 0) return { value: 0, ci_low: 0, ci_high: 0 };
  const value = means.reduce((a, b) => a + b, 0) / means.length;
  const rng = new Rng(seed);
  const samples = new Float64Array(RESAMPLES);
  for (let r = 0; r < RESAMPLES; r++) {
    let sum = 0;
    for (let i = 0; i < means.length; i++) sum += means[rng.int(0, means.length - 1)] as number;
    samples[r] = sum / means.length;
  }
  samples.sort();
  return { value: round(value), ci_low: round(samples[Math.floor(RESAMPLES * 0.025)] as number), ci_high: round(samples[Math.ceil(RESAMPLES * 0.975) - 1] as number) };
}

function choose(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let c = 1;
  for (let i = 1; i <= k; i++) c = (c * (n - k + i)) / i;
  return c;
}

/** tau-bench's pass^k: over tasks, the chance that k trials drawn from its n all succeed, C(c, k) / C(n, k). */
export function passHatK(successesPerTask: readonly (readonly boolean[])[], k: number): number {
  const rows = successesPerTask.filter((t) => t.length >= k);
  if (rows.length === 0) return 0;
  return round(rows.reduce((sum, t) => sum + choose(t.filter(Boolean).length, k) / choose(t.length, k), 0) / rows.length);
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

/**
 * current − baseline over pairs (the same task and trial in both), with a 95% bootstrap interval
 * that resamples tasks. `pairs` holds per task its list of [current, baseline].
 */
export function pairedDifference(pairs: readonly (readonly (readonly [number, number])[])[], seed: number): Estimate & { readonly pairs: number } {
  const diffs = pairs.filter((t) => t.length > 0).map((t) => t.map(([a, b]) => a - b));
  return { ...bootstrapMean(diffs, seed), pairs: diffs.reduce((n, t) => n + t.length, 0) };
}

export function round(n: number, digits = 6): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}
