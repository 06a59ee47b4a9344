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

  it('edits what it made in place within one patch: several operations under one record copy it once, and every new node ends frozen', () => {
    const doc = jsonCopy({ users: { u1: { name: 'a', tier: 1 }, u2: { name: 'b', tier: 2 } }, log: [] }) as JsonValue;
    const out = applyPatch(doc, [
      { op: 'replace', path: '/users/u1/name', value: 'A' },
      { op: 'replace', path: '/users/u1/tier', value: 3 },
      { op: 'add', path: '/users/u1/tags', value: ['x'] },
      { op: 'add', path: '/log/-', value: 'renamed' },
      { op: 'add', path: '/log/-', value: 'promoted' },
    ]) as { users: Record<string, unknown>; log: string[] };
    expect(out).toEqual({ users: { u1: { name: 'A', tier: 3, tags: ['x'] }, u2: { name: 'b', tier: 2 } }, log: ['renamed', 'promoted'] });
    expect(out.users['u2']).toBe((doc as { users: Record<string, unknown> }).users['u2']);
    const frozen = (v: unknown): boolean => typeof v !== 'object' || v === null || (Object.isFrozen(v) && Object.values(v).every(frozen));
    expect(frozen(out)).toBe(true);
    expect(doc).toEqual({ users: { u1: { name: 'a', tier: 1 }, u2: { name: 'b', tier: 2 } }, log: [] });
  });

  it('a copied node is not edited through its other parent (copy, then change the source)', () => {
    const doc = jsonCopy({ a: { n: 1 } }) as JsonValue;
    const out = applyPatch(doc, [
      { op: 'replace', path: '/a/n', value: 2 },
      { op: 'copy', from: '/a', path: '/b' },
      { op: 'replace', path: '/a/n', value: 3 },
      { op: 'move', from: '/b', path: '/c' },
      { op: 'replace', path: '/c/n', value: 4 },
    ]);
    expect(out).toEqual({ a: { n: 3 }, c: { n: 4 } });
  });

  it('takes "__proto__" as a key, also when editing in place', () => {
    const out = applyPatch(jsonCopy({ m: {} }) as JsonValue, [
      { op: 'add', path: '/m/x', value: 1 },
      { op: 'add', path: '/m/__proto__', value: { polluted: true } },
    ]) as { m: Record<string, unknown> };
    expect(Object.getPrototypeOf(out.m)).toBe(Object.prototype);
    expect(Object.keys(out.m)).toEqual(['x', '__proto__']);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });
});
