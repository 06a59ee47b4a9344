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
  return Number.isInteger(n) ? String(n) : n.toFixed(digits);
}

/** A text progress bar: `████░░░░`. */
export function bar(done: number, total: number, width = 24): string {
  const filled = total <= 0 ? 0 : Math.min(width, Math.round((done / total) * width));
  return '█'.repeat(filled) + '░'.repeat(width - filled);
}
