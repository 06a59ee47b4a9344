/**
 * Sums of rewards without binary float noise: `0.1 + -0.2451` is -0.14509999999999998 in IEEE
 * doubles, which a reader of events.jsonl or a trainer's log takes for a real difference. A sum is
 * kept to 12 significant digits, far past any reward's own precision and short of the noise.
 */
export function cleanSum(sum: number): number {
  return Number.isFinite(sum) && sum !== 0 ? Number(sum.toPrecision(12)) : sum;
}
