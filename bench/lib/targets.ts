/**
 * A figure a benchmark holds against its target: `target(…)` returns the "goal … ✓/✗" text for the
 * benchmark's own line and, under `npm run bench`, records the figure (BENCH_TARGETS names the
 * file) so that the runner closes with one table of every target, met or not.
 */
import { appendFileSync } from 'node:fs';

export interface Goal {
  readonly atLeast?: number;
  readonly atMost?: number;
}

export interface TargetRecord {
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  readonly goal: Goal;
  readonly met: boolean;
}

const fmt = (x: number): string => (Math.abs(x) >= 1_000 ? Math.round(x).toLocaleString('en-US') : Number(x.toPrecision(3)).toString());

/** "goal ≥ 0.9 ✓" (or ≤), and the figure recorded for the closing table. */
export function target(name: string, value: number, unit: string, goal: Goal): string {
  const met = (goal.atLeast === undefined || value >= goal.atLeast) && (goal.atMost === undefined || value <= goal.atMost);
  const file = process.env['BENCH_TARGETS'];
  if (file) appendFileSync(file, `${JSON.stringify({ name, value, unit, goal, met } satisfies TargetRecord)}\n`);
  return `goal ${describeGoal(goal, unit)} ${met ? '✓' : '✗'}`;
}

export function describeGoal(goal: Goal, unit: string): string {
  const u = unit ? ` ${unit}` : '';
  return [goal.atLeast !== undefined ? `≥ ${fmt(goal.atLeast)}${u}` : '', goal.atMost !== undefined ? `≤ ${fmt(goal.atMost)}${u}` : ''].filter(Boolean).join(' and ');
}

export function formatValue(value: number, unit: string): string {
  return `${fmt(value)}${unit ? ` ${unit}` : ''}`;
}
