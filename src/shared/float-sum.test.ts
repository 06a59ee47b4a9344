import { describe, expect, it } from 'vitest';
import { cleanSum } from './float-sum.js';

describe('cleanSum', () => {
  it('drops the float noise of a sum and keeps 12 significant digits', () => {
    expect(0.1 + 0.2).not.toBe(0.3);
    expect(cleanSum(0.1 + 0.2)).toBe(0.3);
    expect(cleanSum(-0.3 + 0.1)).toBe(-0.2);
    expect(cleanSum(1 / 3)).toBe(0.333333333333);
  });

  it('returns whole sums as they are, and rounds an integer past 12 digits like any sum', () => {
    for (const n of [0, -0, 1, -7, 250, 999_999_999_999]) expect(Object.is(cleanSum(n), n)).toBe(true);
    expect(cleanSum(12_345_678_901_234)).toBe(12_345_678_901_200);
  });

  it('leaves what is not a finite number alone', () => {
    expect(cleanSum(Number.NaN)).toBeNaN();
    expect(cleanSum(Number.POSITIVE_INFINITY)).toBe(Number.POSITIVE_INFINITY);
  });
});
