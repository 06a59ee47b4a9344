/**
 * Wide objects edited without copying them. A state's big maps (τ-bench airline's 2,000
 * reservations, retail's 1,000 orders) change one record per step, but an immutable edit copies
 * every container on the path, and past ~100 keys V8 keeps an object as a dictionary that object
 * spread copies at 0.2–0.3 µs a key: 380 µs per commit at 2,000 keys, for a one-field change.
 *
 * An edited wide object is therefore a persistent map in two layers: a frozen plain `base` that
 * every version of it shares, and the few keys changed since (`changes`, a Map copied per
 * version, so each version stays immutable and history stays intact). It reaches readers as a
 * read-only Proxy that answers like the plain object it stands for: property reads, `in`,
 * `Object.keys`/`entries`, `for…in`, spread, `JSON.stringify` and `util.inspect`, with the keys
 * in the order the plain object would have them; writes throw, as on a frozen object. After
 * FOLD_AFTER changes a version is folded into a new frozen plain object (O(keys), once per that
 * many commits), so a read costs a Proxy trap and one Map lookup more than a plain read (~40–70
 * ns against ~10–17 by key; a scan of every key ~3× a plain one's).
 *
 * Two things tell a view from a frozen plain object: `Object.isFrozen(view)` is false (a Proxy
 * can only claim to be frozen if its target holds every key, which is the copy this avoids), and
 * structured clone (postMessage, structuredClone) refuses a Proxy: `plainJson` makes the plain
 * copy for that, copying only what lies on the way to a view.
 */
import type { JsonValue } from '../shared/json.js';

/**
 * Objects of at least this many keys are edited as views. Measured on frozen objects from
 * JSON.parse: a spread copy costs 1.5 µs at 64 keys, 28 µs at 128 (a dictionary by then), 380 µs
 * at 2,000; a view's edit costs ~1 µs at any width.
 */
export const WIDE_KEYS = 100;

/** A version with this many changed keys is folded back into a plain object. */
const FOLD_AFTER = 64;

/** Node's `util.inspect.custom`, by its registered name: this module also runs in the web console's page. */
const INSPECT = Symbol.for('nodejs.util.inspect.custom');

type Entries = Readonly<Record<string, JsonValue>>;

/** A frozen plain object that versions share, with its keys once they are asked for. */
class Base {
  #keys: readonly string[] | undefined;

  constructor(
    readonly object: Entries,
    keys?: readonly string[],
  ) {
    this.#keys = keys;
  }

  get keys(): readonly string[] {
    return (this.#keys ??= Object.keys(this.object));
  }
}

/** One version: the target of its Proxy (the traps read these fields; the Proxy never shows them). */
class WideObjectView {
  constructor(
    readonly base: Base,
    readonly changes: ReadonlyMap<string, JsonValue>,
    /** keys the base lacks, in the order they were added (all of them in `changes`) */
    readonly added: readonly string[],
    /** a view somewhere among its values: `plainJson` must look inside */
    readonly holdsViews: boolean,
  ) {}

  hasOwn(key: string): boolean {
    return this.changes.has(key) || Object.hasOwn(this.base.object, key);
  }

  /** In plain-object order (shared with the base when nothing was added: the engine copies what ownKeys returns). */
  keys(): readonly string[] {
    const keys = this.base.keys;
    return this.added.length === 0 ? keys : keys.concat(this.added);
  }

  /**
   * What `util.inspect` (console.log) prints. Node inspects a Proxy's target without its traps and
   * calls the target's custom inspector with the Proxy as `this`: the plain object it stands for.
   */
  [INSPECT](_depth: number, options: object, show: (value: unknown, options: object) => string): string {
    return show(fold(versions.get(this) ?? this, false), options);
  }
}

const refuse = (what: string) => (): never => {
  throw new TypeError(`Cannot ${what} a state object: states are immutable (a tool changes the state by returning a patch)`);
};

const traps: ProxyHandler<WideObjectView> = {
  get(v, key) {
    if (typeof key === 'string') {
      const changed = v.changes.get(key);
      if (changed !== undefined) return changed;
    }
    // Inherited names (toString, hasOwnProperty, symbols) read as on the plain object.
    return (v.base.object as Record<PropertyKey, unknown>)[key];
  },
  has: (v, key) => (typeof key === 'string' && v.changes.has(key)) || key in v.base.object,
  ownKeys: (v) => v.keys() as string[],
  getOwnPropertyDescriptor(v, key) {
    if (typeof key !== 'string' || !v.hasOwn(key)) return undefined;
    // configurable: a Proxy may only report a property non-configurable if its target has it.
    return { value: valueOf(v, key), writable: false, enumerable: true, configurable: true };
  },
  getPrototypeOf: () => Object.prototype,
  set: refuse('assign to a property of'),
  defineProperty: refuse('define a property on'),
  deleteProperty: refuse('delete a property of'),
  setPrototypeOf: refuse('set the prototype of'),
  preventExtensions: refuse('freeze (it already is immutable)'),
};

function valueOf(v: WideObjectView, key: string): JsonValue {
  const changed = v.changes.get(key);
  return changed !== undefined ? changed : (v.base.object[key] as JsonValue);
}

/** Each view's version. */
const versions = new WeakMap<object, WideObjectView>();
/** Plain wide objects already counted, with their Base (one per object, so its keys are listed once). */
const bases = new WeakMap<object, Base>();
/** Views, and the containers a patch made that hold a view somewhere below: what `plainJson` must copy. */
const holders = new WeakSet<object>();

/** True when `value` is a view, or a container with one somewhere below it. */
function holdsView(value: JsonValue): boolean {
  return typeof value === 'object' && value !== null && holders.has(value);
}

/** Record that `container`, one this patch is editing in place, now holds `child`. */
export function noteChild(container: object, child: JsonValue): void {
  if (holdsView(child)) holders.add(container);
}

/** Record what `copy` (of `original`, with `child` set in it) holds. */
export function noteCopy(copy: object, original: object, child: JsonValue): void {
  const version = versions.get(original);
  if ((version !== undefined ? version.holdsViews : holders.has(original)) || holdsView(child)) holders.add(copy);
}

/**
 * `obj` with `key` set to `value`, sharing everything else, when `obj` is a view or a plain object
 * of at least WIDE_KEYS keys; undefined when it is narrower (a copy is cheaper) or when the edit
 * would move keys (a new integer-like key sorts first in a plain object: the caller copies).
 */
export function wideSet(obj: Entries, key: string, value: JsonValue): JsonValue | undefined {
  const from = versions.get(obj);
  const base = from?.base ?? baseOf(obj);
  if (base === undefined) return undefined;
  const isNew = !(from?.changes.has(key) ?? false) && !Object.hasOwn(base.object, key);
  if (isNew && isArrayIndex(key)) return undefined;
  const changes = new Map(from?.changes);
  changes.set(key, value);
  const added = from?.added ?? [];
  const holdsViews = (from ? from.holdsViews : holders.has(obj)) || holdsView(value);
  const next = new WideObjectView(base, changes, isNew ? [...added, key] : added, holdsViews);
  if (changes.size >= FOLD_AFTER) {
    const plain = fold(next, true);
    bases.set(plain, new Base(plain, next.keys()));
    if (holdsViews) holders.add(plain);
    return plain;
  }
  const view = new Proxy(next, traps) as unknown as Entries;
  versions.set(view, next);
  holders.add(view);
  return view;
}

/** The Base of a plain object of at least WIDE_KEYS keys, counted once per object; undefined for a narrower one. */
function baseOf(obj: Entries): Base | undefined {
  const known = bases.get(obj);
  if (known !== undefined) return known;
  let n = 0;
  for (const _ in obj) if (++n >= WIDE_KEYS) break;
  if (n < WIDE_KEYS || !Object.isFrozen(obj)) return undefined;
  const base = new Base(obj);
  bases.set(obj, base);
  return base;
}

/** A version as one plain object, frozen when it becomes state. */
function fold(v: WideObjectView, freeze: boolean): Entries {
  const out: Record<string, JsonValue> = {};
  const { object } = v.base;
  const keys = v.base.keys;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i] as string;
    const changed = v.changes.get(k);
    setOwn(out, k, changed !== undefined ? changed : (object[k] as JsonValue));
  }
  for (const k of v.added) setOwn(out, k, v.changes.get(k) as JsonValue);
  return freeze ? Object.freeze(out) : out;
}

/**
 * The keys whose values may differ between `a` and `b` when both are versions over one base (or
 * `a` is the base `b` was made from): every other key holds the same value in both. Undefined when
 * they are not related so (then only a walk of every key can tell).
 */
export function keysChangedBetween(a: object, b: object): Iterable<string> | undefined {
  const vb = versions.get(b);
  if (vb === undefined) return undefined;
  const va = versions.get(a);
  if (va !== undefined ? va.base !== vb.base : vb.base.object !== a) return undefined;
  if (va === undefined) return vb.changes.keys();
  const keys = new Set(vb.changes.keys());
  for (const k of va.changes.keys()) keys.add(k);
  return keys;
}

/**
 * `value` with every view replaced by a plain object: what structured clone (a worker thread's
 * postMessage) can carry. Shares everything that holds no view, so it costs the path to each
 * view plus the views themselves.
 */
export function plainJson(value: JsonValue): JsonValue {
  if (!holdsView(value)) return value;
  const version = versions.get(value as object);
  if (version !== undefined && !version.holdsViews) return fold(version, false);
  if (Array.isArray(value)) return value.map(plainJson);
  const obj = value as Entries;
  const out: Record<string, JsonValue> = {};
  for (const k of Object.keys(obj)) setOwn(out, k, plainJson(obj[k] as JsonValue));
  return out;
}

/** Keys are data: "__proto__" is set as an own property, never as the prototype. */
function setOwn(obj: Record<string, JsonValue>, key: string, value: JsonValue): void {
  if (key === '__proto__') Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  else obj[key] = value;
}

/** Keys a plain object lists first, in numeric order (canonical array indices). */
function isArrayIndex(key: string): boolean {
  return /^(0|[1-9][0-9]*)$/.test(key) && Number(key) < 4_294_967_295;
}
