/** JSON value types used across the toolkit. State, params and observations are plain JSON. */
import { describeError } from './errors.js';

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** RFC 6901 pointer escaping of one reference token. */
export function escapePointerToken(token: string | number): string {
  return String(token).replace(/~/g, '~0').replace(/\//g, '~1');
}

export function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new SyntaxError(`JSON pointer '${pointer}' must start with '/'`);
  const tokens = pointer.slice(1).split('/');
  if (!pointer.includes('~')) return tokens;
  return tokens.map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
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
 * Copy an untrusted value into frozen plain JSON, in one pass, and refuse anything else: a tool,
 * a policy or a caller hands us objects we must neither keep by reference (the log would change
 * under us) nor trust (getters, Proxies, prototypes). Object properties whose value is
 * `undefined` are dropped, as JSON.stringify does; every other non-JSON value (bigint, function,
 * symbol, NaN, Infinity, Date, Map, class instances, cycles, nesting past {@link MAX_JSON_DEPTH})
 * throws a {@link NotJsonError} with its JSON pointer, as does a getter or Proxy trap that throws.
 * Keys are data: `"__proto__"` becomes an own property, never the copy's prototype.
 */
export function jsonCopy(value: unknown, maxDepth = MAX_JSON_DEPTH): JsonValue {
  const path: string[] = [];
  const ancestors: object[] = [];
  const pointer = (): string => path.map((t) => `/${escapePointerToken(t)}`).join('');
  const copy = (v: unknown): JsonValue => {
    switch (typeof v) {
      case 'string':
      case 'boolean':
        return v;
      case 'number':
        if (!Number.isFinite(v)) throw new NotJsonError(pointer(), `${v} is not JSON (JSON numbers are finite)`);
        return v;
      case 'object':
        break;
      default:
        throw new NotJsonError(pointer(), `${v === undefined ? 'undefined' : `a ${typeof v}`} is not JSON`);
    }
    if (v === null) return null;
    if (ancestors.length >= maxDepth) {
      const cycle = ancestors.indexOf(v);
      throw new NotJsonError(cycle >= 0 ? path.slice(0, cycle).map((t) => `/${escapePointerToken(t)}`).join('') : pointer(), cycle >= 0 ? 'is a cyclic reference' : `nests deeper than ${maxDepth} levels`);
    }
    ancestors.push(v);
    try {
      if (Array.isArray(v)) {
        const n = v.length;
        const out = new Array<JsonValue>(n);
        for (let i = 0; i < n; i++) {
          path.push(String(i));
          out[i] = copy(v[i]);
          path.pop();
        }
        return Object.freeze(out) as JsonValue;
      }
      const proto: unknown = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) throw new NotJsonError(pointer(), `${kindOf(v)} is not JSON (pass a plain object)`);
      const out: Record<string, JsonValue> = {};
      for (const key of Object.keys(v)) {
        path.push(key);
        const child = (v as Record<string, unknown>)[key];
        if (child !== undefined) {
          const c = copy(child);
          if (key === '__proto__') Object.defineProperty(out, key, { value: c, enumerable: true, writable: true, configurable: true });
          else out[key] = c;
        }
        path.pop();
      }
      return Object.freeze(out);
    } finally {
      ancestors.pop();
    }
  };
  try {
    return copy(value);
  } catch (err) {
    if (err instanceof NotJsonError) throw err;
    // A getter or a Proxy trap threw (or the stack ran out inside one): name where, never rethrow it raw.
    throw new NotJsonError(pointer(), `reading it threw: ${describeError(err)}`);
  }
}
