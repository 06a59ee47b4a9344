/** Small formatting helpers shared by the plain reporter and the ink view. */

export function formatDuration(ms: number): string {
  if (ms <= 0) return '0ms';
  if (ms < 1) return `${(ms * 1000).toFixed(0)}µs`;
  if (ms < 1000) return `${ms.toFixed(0)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const m = Math.floor(ms / 60_000);
  return `${m}m${Math.round((ms % 60_000) / 1000)}s`;
}

export function formatNumber(n: number, digits = 1): string {
  if (!Number.isFinite(n)) return String(n);
  if (Math.abs(n) >= 10_000) return Math.round(n).toLocaleString('en-US');
  return Number.isInteger(n) ? String(n) : roundHalfAway(n, digits).toFixed(digits);
}

/**
 * One rounding rule for every number shown: half away from zero on the decimal digits as written
 * (`toFixed` alone rounds 2.55 down, its binary value being 2.5499…, while 2.5500001 goes up: an
 * episode's reward and the summary's maximum of it would disagree).
 */
function roundHalfAway(n: number, digits: number): number {
  const written = String(Math.abs(n));
  // Already in exponent form (below 1e-6): far from any half.
  if (written.includes('e')) return Number(n.toFixed(digits));
  const scaled = Math.round(Number(`${written}e${digits}`));
  return Math.sign(n) * Number(`${scaled}e-${digits}`);
}

/** A text progress bar: `████░░░░`. */
export function bar(done: number, total: number, width = 24): string {
  const filled = total <= 0 ? 0 : Math.min(width, Math.round((done / total) * width));
  return '█'.repeat(filled) + '░'.repeat(width - filled);
}
