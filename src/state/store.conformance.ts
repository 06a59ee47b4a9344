/**
 * The one conformance suite every StateStore adapter must pass. An adapter's test file adds
 * itself with a single call: `describeStateStore('redis', (opts) => new RedisStateStore(...))`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { isAgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { applyPatch, type Patch } from './patch.js';
import type { Delta, StateStore, StateStoreOptions } from './store.js';

export type StoreFactory = (options: StateStoreOptions) => StateStore | Promise<StateStore>;

const T0 = 1_700_000_000_000;

/** A deterministic history: counter increments plus a growing list, one delta per ms. */
function history(n: number): { patches: Patch[]; states: JsonValue[] } {
  let state: JsonValue = { counter: 0, items: [] };
  const patches: Patch[] = [];
  const states: JsonValue[] = [state];
  for (let i = 1; i <= n; i++) {
    const patch: Patch = [
      { op: 'replace', path: '/counter', value: i },
      { op: 'add', path: '/items/-', value: `item-${i}` },
    ];
    state = applyPatch(state, patch);
    patches.push(patch);
    states.push(state);
  }
  return { patches, states };
}

async function expectCode(promise: Promise<unknown>, code: string): Promise<void> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isAgentError(err) ? err.code : err).toBe(code);
}

export function describeStateStore(name: string, factory: StoreFactory): void {
  describe(`StateStore conformance: ${name}`, () => {
    const open: StateStore[] = [];
    let n = 0;
    const make = async (options: StateStoreOptions = {}): Promise<{ store: StateStore; id: string }> => {
      const store = await factory(options);
      open.push(store);
      n += 1;
      return { store, id: `conf-${n}-${Math.random().toString(36).slice(2, 8)}` };
    };
    const fill = async (store: StateStore, id: string, count: number): Promise<JsonValue[]> => {
      const { patches, states } = history(count);
      await store.init(id, states[0] as JsonValue, T0);
      for (let i = 0; i < patches.length; i++) {
        await store.append(id, { patch: patches[i] as Patch, time: T0 + i + 1, trace_id: `t${i + 1}` }, states[i + 1] as JsonValue);
      }
      return states;
    };

    afterEach(async () => {
      for (const store of open.splice(0)) await store[Symbol.asyncDispose]();
    });

    it('appends dense seqs and reconstructs every seq exactly', async () => {
      const { store, id } = await make({ snapshotEvery: 4 });
      const states = await fill(store, id, 11);
      expect(await store.bounds(id)).toEqual({ oldestSeq: 0, headSeq: 11, headTime: T0 + 11 });
      for (let seq = 0; seq <= 11; seq++) {
        const snap = await store.stateAt(id, { seq });
        expect(snap.seq).toBe(seq);
        expect(snap.state).toEqual(states[seq]);
      }
    });

    it('keeps a snapshot every K deltas and reads delta ranges in order', async () => {
      const { store, id } = await make({ snapshotEvery: 4 });
      await fill(store, id, 10);
      expect((await store.snapshotAt(id, 7))?.seq).toBe(4);
      expect((await store.snapshotAt(id, 8))?.seq).toBe(8);
      const deltas = await store.read(id, 3, 6);
      expect(deltas.map((d: Delta) => d.seq)).toEqual([3, 4, 5, 6]);
      expect(deltas[0]?.trace_id).toBe('t3');
    });

    it('answers stateAt(time) with the last delta at or before that time', async () => {
      const { store, id } = await make({ snapshotEvery: 3 });
      const states = await fill(store, id, 6);
      expect((await store.stateAt(id, { time: T0 + 4 })).state).toEqual(states[4]);
      expect((await store.stateAt(id, { time: T0 + 4.5 })).seq).toBe(4);
      expect((await store.stateAt(id, { time: T0 })).state).toEqual(states[0]);
      expect((await store.stateAt(id, { time: T0 + 1e6 })).seq).toBe(6);
      await expectCode(store.stateAt(id, { time: T0 - 1 }), 'STATE_SEQ_TRIMMED');
    });

    it('never lets event time run backwards within an instance', async () => {
      const { store, id } = await make({});
      await store.init(id, { v: 0 }, T0 + 10);
      await store.append(id, { patch: [{ op: 'replace', path: '/v', value: 1 }], time: T0 + 5 }, { v: 1 });
      expect((await store.bounds(id))?.headTime).toBe(T0 + 10);
      expect((await store.stateAt(id, { time: T0 + 10 })).state).toEqual({ v: 1 });
    });

    it('refuses unknown instances and seqs beyond the head with typed errors', async () => {
      const { store, id } = await make({});
      await expectCode(store.stateAt(id, { seq: 0 }), 'STATE_SEQ_UNKNOWN');
      await fill(store, id, 2);
      await expectCode(store.stateAt(id, { seq: 3 }), 'STATE_SEQ_UNKNOWN');
    });

    it('trims only down to a kept snapshot, archives what it removes, and still reconstructs the rest', async () => {
      const archived: Delta[] = [];
      const { store, id } = await make({ snapshotEvery: 5, archive: (_i, ds) => void archived.push(...ds) });
      const states = await fill(store, id, 23);
      // keep 7 → target seq 16; the newest snapshot at or before it is 15.
      const result = await store.trim(id, 7);
      expect(result).toEqual({ removedDeltas: 15, oldestSeq: 15 });
      expect(archived.map((d) => d.seq)).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
      expect((await store.bounds(id))?.oldestSeq).toBe(15);
      for (let seq = 15; seq <= 23; seq++) expect((await store.stateAt(id, { seq })).state).toEqual(states[seq]);
      await expectCode(store.stateAt(id, { seq: 14 }), 'STATE_SEQ_TRIMMED');
      // Trimming again to the same target removes nothing.
      expect((await store.trim(id, 7)).removedDeltas).toBe(0);
    });

    it('bounds growth automatically when retainDeltas is set', async () => {
      const { store, id } = await make({ snapshotEvery: 10, retainDeltas: 20 });
      const states = await fill(store, id, 200);
      const bounds = await store.bounds(id);
      expect(bounds?.headSeq).toBe(200);
      expect(200 - (bounds?.oldestSeq ?? 0)).toBeLessThanOrEqual(20 + 10);
      expect(200 - (bounds?.oldestSeq ?? 0)).toBeGreaterThanOrEqual(20);
      expect((await store.stateAt(id, { seq: 200 })).state).toEqual(states[200]);
      expect((await store.read(id, 0, 200)).length).toBeLessThanOrEqual(30);
    });

    it('keeps instances apart, and init replaces an instance history', async () => {
      const a = await make({});
      const b = `${a.id}-other`;
      await fill(a.store, a.id, 3);
      await a.store.init(b, { other: true }, T0);
      expect((await a.store.stateAt(b, { seq: 0 })).state).toEqual({ other: true });
      await a.store.init(a.id, { fresh: 1 }, T0 + 100);
      expect(await a.store.bounds(a.id)).toEqual({ oldestSeq: 0, headSeq: 0, headTime: T0 + 100 });
      await a.store.drop(a.id);
      await a.store.drop(b);
      expect(await a.store.bounds(a.id)).toBeUndefined();
    });

    it('honours an aborted signal', async () => {
      const { store, id } = await make({});
      await fill(store, id, 1);
      const ac = new AbortController();
      ac.abort(new Error('stop'));
      await expect(store.stateAt(id, { seq: 1 }, ac.signal)).rejects.toThrow('stop');
    });
  });
}
