/**
 * A delayed reward source's service level: its values by status, and how long they took to arrive
 * (the live view's and the run summary's SLA).
 */

/** One reward source's service level: arrival latency percentiles, the shares on time, imputed, late and pending, and the counts. */
export interface SourceSla extends Omit<SlaCounts, 'imputed'> {
  /** Arrival delay (ms) over arrived and late values; null when none arrived. */
  readonly latency_ms: { readonly p50: number; readonly p95: number; readonly p99: number; readonly max: number } | null;
  readonly share_within_deadline: number;
  readonly share_imputed: number;
  readonly share_late: number;
  readonly share_pending: number;
}

/** Values of one source by status; `imputed` counts those that got a fallback (some of them then arrived late). */
export interface SlaCounts {
  readonly expected: number;
  readonly arrived: number;
  readonly fallback: number;
  readonly late: number;
  readonly failed: number;
  readonly pending: number;
  readonly imputed: number;
}

export type Counts = { -readonly [K in keyof SlaCounts]: number };

function percentile(sorted: Float64Array, p: number): number {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] as number;
}

export function slaOf(counts: SlaCounts, delays: readonly number[]): SourceSla {
  const { imputed, ...c } = counts;
  const sorted = Float64Array.from(delays).sort();
  const share = (n: number): number => (c.expected === 0 ? 0 : Math.round((n / c.expected) * 1e4) / 1e4);
  return {
    ...c,
    latency_ms: sorted.length === 0 ? null : { p50: percentile(sorted, 50), p95: percentile(sorted, 95), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] as number },
    share_within_deadline: share(c.arrived),
    share_imputed: share(imputed),
    share_late: share(c.late),
    share_pending: share(c.pending),
  };
}
