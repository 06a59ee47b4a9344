/** Numbers and times as the console shows them. */

export function ms(v: number | undefined): string {
  if (v === undefined) return '–';
  if (v < 1) return `${v.toFixed(2)} ms`;
  if (v < 1_000) return `${v.toFixed(v < 10 ? 1 : 0)} ms`;
  if (v < 60_000) return `${(v / 1_000).toFixed(v < 10_000 ? 2 : 1)} s`;
  if (v < 3_600_000) return `${Math.floor(v / 60_000)} min ${Math.round((v % 60_000) / 1_000)} s`;
  return `${(v / 3_600_000).toFixed(1)} h`;
}

export function clock(t: number | undefined): string {
  if (t === undefined) return '–';
  const d = new Date(t);
  return `${d.toISOString().slice(11, 23)}`;
}

export function count(n: number): string {
  return n.toLocaleString('en-US');
}

export function pct(v: number | null | undefined): string {
  return v === null || v === undefined ? '–' : `${(v * 100).toFixed(1)} %`;
}

export function num(v: number | undefined): string {
  if (v === undefined) return '–';
  return Number.isInteger(v) ? String(v) : v.toFixed(3).replace(/0+$/, '');
}

/** A value shortened for a table cell. */
export function short(v: unknown, max = 80): string {
  const s = v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
