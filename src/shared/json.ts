/** JSON value types used across the toolkit. State, params and observations are plain JSON. */
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
 * Deep-copy a JSON value and freeze the copy, in one pass: states are shared between snapshots, so
 * nobody may mutate one. Faster than structuredClone plus a freezing walk for the small objects that
 * params, patches and observations are. Non-JSON leaves (undefined, functions) are dropped from
 * objects, as JSON.stringify would.
 */
export function freezeCopy<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) out[i] = freezeCopy(value[i]);
    return Object.freeze(out) as T;
  }
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[key];
    if (v !== undefined && typeof v !== 'function') out[key] = freezeCopy(v);
  }
  return Object.freeze(out) as T;
}
