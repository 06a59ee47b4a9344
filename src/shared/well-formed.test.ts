import { describe, expect, it } from 'vitest';
import { WellFormed } from './well-formed.js';

const lone = '\uD83D';

describe('WellFormed', () => {
  it('returns what has no lone surrogate as it is, the same objects', () => {
    const text = new WellFormed();
    const value = { a: ['x', { b: 'ok 😀' }], n: 1, z: null };
    expect(text.value(value, 'record 0')).toBe(value);
    expect(text.replaced).toEqual({ strings: 0 });
  });

  it('replaces lone surrogates in values and keys, copying only the path to them, and names the first', () => {
    const text = new WellFormed();
    const shared = { untouched: ['a'] };
    const value = { shared, deep: [{ [`k${lone}`]: 1 }, `tail ${'\uDE00'}`] };
    const clean = text.value(value, 'episode 2 step 3');
    expect(clean).toEqual({ shared, deep: [{ 'k\uFFFD': 1 }, 'tail \uFFFD'] });
    expect(clean.shared).toBe(shared);
    expect(value.deep[1]).toBe(`tail ${'\uDE00'}`);
    expect(text.replaced).toEqual({ strings: 2, first: "episode 2 step 3 at /deep/0/k\uFFFD" });
  });

  it('walks a value many records share once', () => {
    const text = new WellFormed();
    const state = { note: `cut ${lone}` };
    const records = [0, 1, 2].map((i) => text.value({ i, state }, `step ${i}`));
    expect(records.every((r) => r.state === records[0]?.state)).toBe(true);
    expect(text.replaced.strings).toBe(1);
  });
});
