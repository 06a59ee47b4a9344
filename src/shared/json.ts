/** JSON value types used across the toolkit. State, params and observations are plain JSON. */
import { describeError } from './errors.js';

export type JsonPrimitive = string | number | boolean | null;
/** Any JSON value: what states, parameters and observations are. */
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** RFC 6901 pointer escaping of one reference token. */
export function escapePointerToken(token: string | number): string {
  return String(token).replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * The tokens of a JSON pointer. Frozen and cached: tools patch the same few paths step after step,
 * and a split per operation was a measurable share of a commit (bench/graph-loop.bench.ts).
 */
export function parsePointer(pointer: string): readonly string[] {
  const known = pointers.get(pointer);
  if (known) return known;
  if (pointer === '') return NO_TOKENS;
  if (!pointer.startsWith('/')) throw new SyntaxError(`JSON pointer '${pointer}' must start with '/'`);
  const split = pointer.slice(1).split('/');
  const tokens = Object.freeze(pointer.includes('~') ? split.map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~')) : split);
  if (pointers.size >= MAX_CACHED_POINTERS) pointers.clear();
  pointers.set(pointer, tokens);
  return tokens;
}

const NO_TOKENS: readonly string[] = Object.freeze([]);
const MAX_CACHED_POINTERS = 10_000;
const pointers = new Map<string, readonly string[]>();

/** The value at a JSON pointer, or undefined when there is none (or the pointer is malformed). */
export function valueAtPointer(doc: JsonValue, pointer: string): JsonValue | undefined {
  let tokens: readonly string[];
  try {
    tokens = parsePointer(pointer);
  } catch {
    return undefined;
  }
  let node: JsonValue | undefined = doc;
  for (const t of tokens) {
    if (Array.isArray(node)) node = /^(0|[1-9]\d*)$/.test(t) ? node[Number(t)] : undefined;
    else if (isPlainObject(node) && Object.prototype.hasOwnProperty.call(node, t)) node = node[t];
    else return undefined;
  }
  return node;
}

/**
 * How deep a value from outside (params, a tool's result, an initial state) may nest. Real
 * documents stay far below it; past it, validators and formatters would overflow the stack, so
 * a deeper value is refused with a typed error instead of a RangeError.
 */
export const MAX_JSON_DEPTH = 512;

/** A value is not plain JSON; `pointer` locates the offending part. */
export class NotJsonError extends Error {
  readonly pointer: string;
  readonly reason: string;
  constructor(pointer: string, reason: string) {
    super(`${pointer === '' ? '(root)' : pointer}: ${reason}`);
    this.name = 'NotJsonError';
    this.pointer = pointer;
    this.reason = reason;
  }
}

function kindOf(value: object): string {
  try {
    const name = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
    return typeof name === 'string' && name !== '' ? `a ${name}` : 'an object with a custom prototype';
  } catch {
    return 'an exotic object';
  }
}

/**
 * Whether JSON text nests deeper than `max` arrays and objects, read as bytes before it is parsed:
 * a message from the network that nests 300,000 deep parses (V8's JSON.parse does not recurse),
 * then overflows the stack of whatever walks it next (a schema validator, a copy), and that
 * failure lands far from the request that caused it. Strings are skipped, escapes included.
 */
export function nestsDeeperThan(text: string, max = MAX_JSON_DEPTH): boolean {
  // Each level opens with a bracket: a text this short cannot nest that deep (most messages are).
  if (text.length <= max) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Inside a string: only an unescaped quote ends it.
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === 0x5c) i++;
        else if (s === 0x22) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/**
 * Copy an untrusted value into frozen plain JSON, in one pass, and refuse anything else: a tool,
 * a policy or a caller hands us objects we must neither keep by reference (the log would change
 * under us) nor trust (getters, Proxies, prototypes). Object properties whose value is
 * `undefined` are dropped, as JSON.stringify does; every other non-JSON value (bigint, function,
 * symbol, NaN, Infinity, Date, Map, class instances, cycles, nesting past {@link MAX_JSON_DEPTH})
 * throws a {@link NotJsonError} with its JSON pointer, as does a getter or Proxy trap that throws.
 * Keys are data: `"__proto__"` becomes an own property, never the copy's prototype.
 *
 * `remember: false` for the small values copied once per step (params, a tool's result): they
 * are never handed back to be copied again, and an entry in the weak set per step is work for
 * every garbage collection (bench/cold-start.bench.ts).
 */
export function jsonCopy(value: unknown, options: { readonly remember?: boolean; readonly maxDepth?: number } = {}): JsonValue {
  if (typeof value === 'object' && value !== null && copies.has(value)) return value as JsonValue;
  const maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  try {
    const copy = copyJson(value, maxDepth, maxDepth);
    if (options.remember !== false && typeof copy === 'object' && copy !== null) copies.add(copy);
    return copy;
  } catch (err) {
    if (err instanceof Unwinding) {
      const pointer = err.tokens.map((t) => `/${escapePointerToken(t)}`).join('');
      throw new NotJsonError(err.cycleAt ? err.cycleAt.map((t) => `/${escapePointerToken(t)}`).join('') : pointer, err.cycleAt ? 'is a cyclic reference' : err.reason);
    }
    // A getter or a Proxy trap threw before any frame could say where: the root.
    throw new NotJsonError('', `reading it threw: ${describeError(err)}`);
  }
}

/**
 * Values jsonCopy made: deeply frozen plain JSON, so copying one again would give an equal value.
 * A 5 MB initial state is copied once, not at every reset.
 */
const copies = new WeakSet<object>();

/** True for a value jsonCopy returned (deeply frozen plain JSON: safe to share, and to remember facts about). */
export function isJsonCopy(value: unknown): boolean {
  return typeof value === 'object' && value !== null && copies.has(value);
}

/**
 * Carries a failure up the recursion: each frame prepends its key, so the happy path pays for no
 * path bookkeeping at all. At the depth limit it also carries the value, so that the ancestor
 * holding that same object can tell a cycle from mere depth.
 */
class Unwinding {
  readonly tokens: string[] = [];
  cycleAt: string[] | undefined;
  constructor(
    readonly reason: string,
    readonly deepValue?: object,
  ) {}
}

function copyJson(v: unknown, depthLeft: number, maxDepth: number): JsonValue {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return v;
    case 'number':
      if (!Number.isFinite(v)) throw new Unwinding(`${v} is not JSON (JSON numbers are finite)`);
      return v;
    case 'object':
      break;
    default:
      throw new Unwinding(`${v === undefined ? 'undefined' : `a ${typeof v}`} is not JSON`);
  }
  if (v === null) return null;
  if (depthLeft === 0) throw new Unwinding(`nests deeper than ${maxDepth} levels`, v);
  let key: string | undefined;
  try {
    if (Array.isArray(v)) {
      const n = v.length;
      const out = new Array<JsonValue>(n);
      for (let i = 0; i < n; i++) {
        key = String(i);
        out[i] = copyJson(v[i], depthLeft - 1, maxDepth);
      }
      return Object.freeze(out) as JsonValue;
    }
    const proto: unknown = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) throw new Unwinding(`${kindOf(v)} is not JSON (pass a plain object)`);
    const out: Record<string, JsonValue> = {};
    // for…in with an own-key test, not Object.keys: no array of keys per object copied.
    for (const k in v) {
      key = k;
      if (!Object.hasOwn(v, k)) continue;
      const child = (v as Record<string, unknown>)[k];
      if (child === undefined) continue;
      const c = copyJson(child, depthLeft - 1, maxDepth);
      if (k === '__proto__') Object.defineProperty(out, k, { value: c, enumerable: true, writable: true, configurable: true });
      else out[k] = c;
    }
    return Object.freeze(out);
  } catch (err) {
    const u = err instanceof Unwinding ? err : new Unwinding(`reading it threw: ${describeError(err)}`);
    // No key yet: this object itself is at fault (its prototype, or a trap of Object.keys).
    if (key !== undefined) {
      u.tokens.unshift(key);
      u.cycleAt?.unshift(key);
    }
    // The shallowest ancestor that is the too-deep object itself: a cycle, located there.
    if (u.deepValue === v) u.cycleAt = [];
    throw u;
  }
}
