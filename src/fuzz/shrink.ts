/**
 * Structural shrinking: drop keys, shorten arrays, move numbers and strings toward zero and empty.
 * A candidate is kept when it is still an input of the same kind (checked by `admissible`, so a
 * valid input stays valid and numbers stop at their schema bounds) and still fails the same way.
 * Greedy, smallest first, within a time budget.
 */
import { isPlainObject, type JsonValue } from '../shared/json.js';

/** Smaller variants of a JSON value, most aggressive first. */
export function* smaller(v: JsonValue): Generator<JsonValue> {
  if (Array.isArray(v)) {
    if (v.length > 0) yield [];
    if (v.length > 1) yield v.slice(0, Math.floor(v.length / 2));
    for (let i = 0; i < v.length; i++) yield [...v.slice(0, i), ...v.slice(i + 1)];
    for (let i = 0; i < v.length; i++) for (const item of smaller(v[i] as JsonValue)) yield v.map((x, j) => (j === i ? item : x));
  } else if (isPlainObject(v)) {
    const keys = Object.keys(v);
    for (const k of keys) yield Object.fromEntries(Object.entries(v).filter(([key]) => key !== k)) as JsonValue;
    for (const k of keys) for (const child of smaller(v[k] as JsonValue)) yield { ...v, [k]: child };
  } else if (typeof v === 'number') {
    if (v === 0) return;
    yield 0;
    // Rounder first: 388.501 → 388, 777 → 800 or 780: a failing input that reads like a person wrote it.
    if (!Number.isInteger(v)) {
      yield Math.trunc(v);
      yield Math.round(v);
    }
    for (let digits = 1; digits <= 3; digits++) {
      const round: number = Number(v.toPrecision(digits));
      if (round !== v) yield round;
    }
    // Halving steps toward zero: a bound stops the walk, since candidates past it are not admissible.
    const integer = Number.isInteger(v);
    for (let d = v / 2; Math.abs(d) >= (integer ? 1 : 1e-3); d /= 2) {
      const next: number = integer ? v - Math.trunc(d) : v - d;
      if (next !== v) yield next;
    }
    if (integer) yield v - Math.sign(v);
  } else if (typeof v === 'string') {
    if (v.length > 0) yield '';
    if (v.length > 1) yield v.slice(0, Math.floor(v.length / 2));
    if (v.length > 0) yield v.slice(0, -1);
  } else if (v === true) {
    yield false;
  }
}

const size = (v: unknown): number => JSON.stringify(v).length;

export async function shrinkValue(
  start: JsonValue,
  admissible: (v: JsonValue) => boolean,
  stillFails: (v: JsonValue) => Promise<boolean>,
  deadline: number,
  now: () => number,
): Promise<{ value: JsonValue; steps: number }> {
  let current = start;
  let steps = 0;
  let improved = true;
  while (improved && now() < deadline) {
    improved = false;
    for (const candidate of smaller(current)) {
      if (now() >= deadline) break;
      // Progress is a shorter input (a rounder number is one), or numbers closer to zero.
      if (size(candidate) >= size(current) && !numericProgress(candidate, current)) continue;
      if (!admissible(candidate)) continue;
      if (await stillFails(candidate)) {
        current = candidate;
        steps++;
        improved = true;
        break;
      }
    }
  }
  return { value: current, steps };
}

/** Sum of |numbers|: a candidate with a smaller sum moved toward zero. */
function numericProgress(a: unknown, b: unknown): boolean {
  const mag = (v: unknown): number => (typeof v === 'number' ? Math.abs(v) : Array.isArray(v) ? v.reduce((s: number, x) => s + mag(x), 0) : isPlainObject(v) ? Object.values(v).reduce((s: number, x) => s + mag(x), 0) : 0);
  return mag(a) < mag(b);
}
