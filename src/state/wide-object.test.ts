import { inspect, types } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentEnv, applyPatch, defineEnv, plainJson, type JsonValue, type Patch, type PatchOperation } from '../index.js';
import { jsonCopy } from '../shared/json.js';
import { diffStates } from './diff.js';
import { WIDE_KEYS } from './wide-object.js';

type Obj = Record<string, JsonValue>;

/** Deterministic randomness (mulberry32): a failure replays. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const wideMap = (n: number, prefix: string, inner?: (i: number) => JsonValue): Obj =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, inner ? inner(i) : { n: i, tags: [] }]));

/** The oracle: the same patch applied by mutating a plain JSON copy (what key order a plain object has is V8's to decide). */
function mutate(doc: Obj, patch: Patch): Obj {
  const out = JSON.parse(JSON.stringify(doc)) as Obj;
  const parentOf = (path: string): [Obj | JsonValue[], string] => {
    const tokens = path.split('/').slice(1);
    let node: JsonValue = out;
    for (const t of tokens.slice(0, -1)) node = (node as Obj)[t] as JsonValue;
    return [node as Obj, tokens[tokens.length - 1] as string];
  };
  const set = (path: string, value: JsonValue): void => {
    const [parent, key] = parentOf(path);
    if (Array.isArray(parent)) parent.push(value);
    else Object.defineProperty(parent, key, { value, enumerable: true, writable: true, configurable: true });
  };
  for (const op of patch) {
    if (op.op === 'add' || op.op === 'replace') set(op.path, JSON.parse(JSON.stringify(op.value)) as JsonValue);
    else if (op.op === 'remove') {
      const [parent, key] = parentOf(op.path);
      Reflect.deleteProperty(parent, key);
    } else if (op.op === 'copy' || op.op === 'move') {
      const [from, key] = parentOf(op.from);
      const value = JSON.parse(JSON.stringify((from as Obj)[key])) as JsonValue;
      if (op.op === 'move') Reflect.deleteProperty(from, key);
      set(op.path, value);
    }
  }
  return out;
}

describe('wide objects (maps of WIDE_KEYS keys or more) under patches', () => {
  it('answer every read as the plain object would, in the same key order, through hundreds of edits; every earlier version stays as it was', () => {
    const random = rng(7);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
    // A wide map, a wide map whose records hold wide maps, and a narrow neighbour on the same path.
    let state = jsonCopy({
      db: { m: wideMap(WIDE_KEYS + 20, 'k'), nested: wideMap(WIDE_KEYS, 'r', (i) => (i < 3 ? wideMap(WIDE_KEYS, 'x') : { n: i })) },
      small: { a: 1 },
      log: [],
    }) as Obj;
    let oracle = JSON.parse(JSON.stringify(state)) as Obj;
    const history: [JsonValue, string][] = [];
    let views = 0;
    const keysAt = (doc: Obj, path: string): string[] => Object.keys(path.split('/').slice(1).reduce<JsonValue>((n, t) => (n as Obj)[t] as JsonValue, doc) as Obj);
    // One operation that is valid on `doc`: a patch is built op by op against the oracle.
    const randomOp = (doc: Obj, tag: string): PatchOperation => {
      const m = keysAt(doc, '/db/m');
      const key = pick(m);
      const r1 = keysAt(doc, '/db/nested').includes('r1');
      const r = random();
      if (r < 0.35) return { op: 'replace', path: `/db/m/${key}/n`, value: tag };
      if (r < 0.45) return { op: 'add', path: `/db/m/${pick(['new', '__proto__', '7', '42', 'z'])}${random() < 0.3 ? '' : tag}`, value: { n: tag, tags: [] } };
      if (r < 0.5 && m.length > WIDE_KEYS / 2) return { op: 'remove', path: `/db/m/${key}` };
      if (r < 0.6) return { op: 'add', path: `/db/m/${key}/tags/-`, value: tag };
      if (r < 0.65) return { op: 'copy', from: `/db/m/${key}`, path: `/db/m/copy${tag}` };
      if (r < 0.7) return { op: 'replace', path: '/small/a', value: tag };
      if (r < 0.8 && r1) return { op: 'replace', path: `/db/nested/r1/${pick(keysAt(doc, '/db/nested/r1'))}`, value: { n: tag } };
      if (r < 0.85 && r1) return { op: 'move', from: '/db/nested/r1', path: `/db/nested/moved${tag}` };
      if (r < 0.9) return { op: 'copy', from: '/db/nested/r0', path: '/db/nested/r1' };
      return { op: 'test', path: `/db/m/${key}/n`, value: ((((doc['db'] as Obj)['m'] as Obj)[key] as Obj)['n'] as JsonValue) ?? null };
    };
    for (let step = 0; step < 400; step++) {
      const patch: PatchOperation[] = [];
      let next = oracle;
      for (let k = 0, n = 1 + Math.floor(random() * 3); k < n; k++) {
        const op = randomOp(next, `${step}_${k}`);
        patch.push(op);
        next = mutate(next, [op]);
      }
      state = applyPatch(state, patch);
      oracle = next;
      expect(JSON.stringify(state)).toBe(JSON.stringify(oracle));
      const view = (state['db'] as Obj)['m'] as Obj;
      const plain = (oracle['db'] as Obj)['m'] as Obj;
      expect(Object.keys(view)).toEqual(Object.keys(plain));
      const probe = pick(Object.keys(plain));
      expect(probe in view && Object.hasOwn(view, probe) && view[probe]).toEqual(plain[probe]);
      expect('toString' in view && !Object.hasOwn(view, 'toString') && !('nope' in view)).toBe(true);
      history.push([state, JSON.stringify(state)]);
      if (types.isProxy(view)) views++;
    }
    // The edits did go through views (not only through copies), and folds happened.
    expect(views).toBeGreaterThan(100);
    expect(views).toBeLessThan(400);
    for (const [version, json] of history) expect(JSON.stringify(version)).toBe(json);
    // An episode's final patch (diffStates) between two versions replays to the later one, and is
    // the patch a walk of every key finds on the same states as plain objects.
    const start = history[0]?.[0] as Obj;
    const byPath = (ops: PatchOperation[]): PatchOperation[] => ops.slice().sort((x, y) => x.path.localeCompare(y.path));
    for (const [i, [version]] of history.entries()) {
      if (i % 20 !== 0) continue;
      for (const [from, to] of [[start, version], [version, state]] as const) {
        const patch = diffStates(from, to);
        expect(applyPatch(from, patch)).toEqual(JSON.parse(JSON.stringify(to)));
        expect(byPath(patch)).toEqual(byPath(diffStates(plainJson(from), plainJson(to))));
      }
    }
    // What structured clone carries: plain objects, equal to the views.
    expect(structuredClone(plainJson(state))).toEqual(JSON.parse(JSON.stringify(state)));
  });

  it('read like plain objects in every way a tool reads them, print like them, and refuse writes as a frozen object does', () => {
    const plain = wideMap(WIDE_KEYS + 5, 'k', (i) => i);
    const state = applyPatch(jsonCopy({ m: plain }) as Obj, [
      { op: 'replace', path: '/m/k3', value: 33 },
      { op: 'add', path: '/m/added', value: -1 },
    ]);
    const view = state['m'] as Obj;
    const expected = { ...plain, k3: 33, added: -1 };
    expect({ ...view }).toEqual(expected);
    expect(Object.entries(view)).toEqual(Object.entries(expected));
    const forIn: string[] = [];
    for (const k in view) forIn.push(k);
    expect(forIn).toEqual(Object.keys(expected));
    expect(JSON.stringify(view)).toBe(JSON.stringify(expected));
    expect(inspect(view, { depth: 0 })).toBe(inspect(expected, { depth: 0 }));
    expect(Object.getPrototypeOf(view)).toBe(Object.prototype);
    expect(Array.isArray(view)).toBe(false);
    expect(Object.getOwnPropertyDescriptor(view, 'k3')).toMatchObject({ value: 33, enumerable: true, writable: false });
    expect(() => {
      view['k1'] = 2;
    }).toThrow(/states are immutable/);
    expect(() => delete view['k1']).toThrow(TypeError);
    expect(() => Object.defineProperty(view, 'x', { value: 1 })).toThrow(TypeError);
    expect(() => Object.setPrototypeOf(view, null)).toThrow(TypeError);
    expect(view['k1']).toBe(1);
    // The state it came from is untouched.
    expect(plain['k3']).toBe(3);
  });

  it("diff an episode's start and end inside a wide map by the keys that changed, as a walk of every key would", () => {
    const start = jsonCopy({ m: wideMap(WIDE_KEYS * 3, 'k'), small: { a: 1 } }) as Obj;
    let state = start;
    const edits: PatchOperation[] = [
      { op: 'replace', path: '/m/k5/n', value: -5 },
      { op: 'add', path: '/m/fresh', value: { n: 0, tags: [] } },
      { op: 'add', path: '/m/k7/tags/-', value: 'x' },
      { op: 'replace', path: '/m/k5/n', value: 5 },
      { op: 'replace', path: '/m/k9', value: { n: 9, tags: ['y'] } },
      { op: 'replace', path: '/small/a', value: 2 },
    ];
    const seen: Obj[] = [];
    for (const op of edits) {
      state = applyPatch(state, [op]);
      seen.push(state);
    }
    const byPath = (ops: PatchOperation[]): PatchOperation[] => ops.slice().sort((x, y) => x.path.localeCompare(y.path));
    // k5 changed and changed back: nothing; k9's n is what it was: only its tags.
    expect(byPath(diffStates(start, state))).toEqual([
      { op: 'add', path: '/m/fresh', value: { n: 0, tags: [] } },
      { op: 'replace', path: '/m/k7/tags', value: ['x'] },
      { op: 'replace', path: '/m/k9/tags', value: ['y'] },
      { op: 'replace', path: '/small/a', value: 2 },
    ]);
    expect(byPath(diffStates(start, state))).toEqual(byPath(diffStates(start, plainJson(state))));
    // Between two later versions (both views): what one has changed and the other not, both ways.
    const [, second, third] = seen as [Obj, Obj, Obj];
    expect(applyPatch(second, diffStates(second, state))).toEqual(JSON.parse(JSON.stringify(state)));
    expect(applyPatch(state, diffStates(state, third))).toEqual(JSON.parse(JSON.stringify(third)));
  });

  it('plainJson copies only the path to a view: what holds none is shared, the result survives structured clone', () => {
    const doc = jsonCopy({ db: { m: wideMap(WIDE_KEYS, 'k') }, small: { a: 1 }, list: [{ b: 2 }] }) as Obj;
    const state = applyPatch(doc, [{ op: 'replace', path: '/db/m/k0/n', value: 9 }]);
    expect(() => structuredClone(state)).toThrow();
    const plain = plainJson(state) as Obj;
    expect(plain['small']).toBe(state['small']);
    expect(plain['list']).toBe(state['list']);
    expect(structuredClone(plain)).toEqual(JSON.parse(JSON.stringify(state)));
    // A state that never had a wide edit is returned as it is.
    expect(plainJson(doc)).toBe(doc);
  });
});

describe('a worker-isolated tool on a state with a wide map', () => {
  const open: AsyncDisposable[] = [];
  afterEach(async () => {
    for (const r of open.splice(0).reverse()) await r[Symbol.asyncDispose]();
  });

  it('reads the edited map as plain JSON on the other side of postMessage', async () => {
    const def = await defineEnv(
      {
        state: { type: 'object' },
        actions: [
          { name: 'state_keys', parameters: { type: 'object', properties: { map: { type: 'string' } } } },
          { name: 'touch', parameters: { type: 'object' } },
        ],
        module: 'tools.ts',
        tools: { state_keys: { export: 'stateKeys', isolate: 'worker', timeout_ms: 10_000, concurrency: 1 } },
      },
      { dir: 'fixtures/cpu' },
    );
    const env = await AgentEnv.create(def, { handlers: { touch: () => ({ patch: [{ op: 'replace', path: '/m/k0', value: 'edited' }, { op: 'add', path: '/m/last', value: 1 }] }) } });
    open.push(env);
    const agent = env.createInstance();
    await agent.reset({ m: wideMap(WIDE_KEYS * 2, 'k', (i) => i) });
    expect((await agent.step({ name: 'touch' })).info.status).toBe('resolved');
    const r = await agent.step({ name: 'state_keys', params: { map: 'm' } });
    expect(r.info.error).toBeUndefined();
    expect(r.observation).toEqual({ keys: WIDE_KEYS * 2 + 1, last: 'last', first: 'edited' });
  });
});
