import { describe, expect, it } from 'vitest';
import { applyPatch, assertPatch, PatchError } from './patch.js';
import { jsonCopy, type JsonValue } from '../shared/json.js';

describe('applyPatch', () => {
  const base = jsonCopy({ a: { b: [1, 2, 3] }, keep: { big: 'x' } }) as JsonValue;

  it('applies every RFC 6902 operation without mutating the input', () => {
    const out = applyPatch(base, [
      { op: 'add', path: '/a/b/1', value: 9 },
      { op: 'remove', path: '/a/b/0' },
      { op: 'replace', path: '/a/b/-'.replace('-', '2'), value: 7 },
      { op: 'copy', from: '/a/b', path: '/c' },
      { op: 'move', from: '/c', path: '/d' },
      { op: 'test', path: '/d/0', value: 9 },
      { op: 'add', path: '/a/b/-', value: 4 },
    ]);
    expect(out).toEqual({ a: { b: [9, 2, 7, 4] }, keep: { big: 'x' }, d: [9, 2, 7] });
    expect(base).toEqual({ a: { b: [1, 2, 3] }, keep: { big: 'x' } });
  });

  it('shares untouched subtrees and freezes what it creates', () => {
    const out = applyPatch(base, [{ op: 'replace', path: '/a/b/0', value: 5 }]) as { keep: unknown; a: { b: number[] } };
    expect(out.keep).toBe((base as { keep: unknown }).keep);
    expect(Object.isFrozen(out.a.b)).toBe(true);
    expect(() => {
      out.a.b[0] = 1;
    }).toThrow(TypeError);
  });

  it('replaces the whole document on path ""', () => {
    expect(applyPatch(base, [{ op: 'replace', path: '', value: { z: 1 } }])).toEqual({ z: 1 });
  });

  it('fails atomically with the index of the bad operation', () => {
    const err = (() => {
      try {
        applyPatch(base, [
          { op: 'replace', path: '/keep/big', value: 'y' },
          { op: 'remove', path: '/missing' },
        ]);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(PatchError);
    expect((err as PatchError).index).toBe(1);
    expect(base).toEqual({ a: { b: [1, 2, 3] }, keep: { big: 'x' } });
  });

  it('rejects out-of-range indexes, failed tests and unknown ops', () => {
    expect(() => applyPatch(base, [{ op: 'add', path: '/a/b/5', value: 1 }])).toThrow(/out of bounds/);
    expect(() => applyPatch(base, [{ op: 'test', path: '/keep/big', value: 'nope' }])).toThrow(/test failed/);
    expect(() => assertPatch([{ op: 'merge', path: '/a' }])).toThrow(/unknown op 'merge'/);
    expect(() => assertPatch({ op: 'add' })).toThrow(/array/);
  });
});
