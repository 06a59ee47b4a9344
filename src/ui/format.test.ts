import { describe, expect, it } from 'vitest';
import { formatNumber } from './format.js';

describe('formatNumber', () => {
  it('rounds half away from zero on the digits as written, so an episode and the summary agree', () => {
    expect(formatNumber(2.55)).toBe('2.6');
    expect(formatNumber(2.5500000001)).toBe('2.6');
    expect(formatNumber(2.549999)).toBe('2.5');
    expect(formatNumber(-2.55)).toBe('-2.6');
    expect(formatNumber(1.005, 2)).toBe('1.01');
    expect(formatNumber(0.05)).toBe('0.1');
    expect(formatNumber(1e-7)).toBe('0.0');
    expect(formatNumber(3)).toBe('3');
    expect(formatNumber(12_345.6)).toBe('12,346');
    expect(formatNumber(Number.NaN)).toBe('NaN');
  });
});
