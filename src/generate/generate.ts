/**
 * Seeded generation of valid values from any JSON Schema: the random policy's params, initial
 * states, schema-diff's witnesses and states, and fuzz cases. It walks the
 * normalized schema (`$ref`s resolved, recursion included), merges `allOf`, picks `anyOf`/`oneOf`
 * branches, steers `if/then/else`, generates formats and fractional `multipleOf` steps itself and
 * uses json-schema-faker only for regex patterns (and as a last resort). Every value is checked
 * with ajv; one that fails is retried with a fresh draw and counted as a generator miss.
 */
import { generateSync } from 'json-schema-faker';
import { compileSchema, type JsonSchema } from '../schema/ajv.js';
import { AgentError } from '../shared/errors.js';
import { normalize, type Schema, type SchemaObject } from '../schema/normalize.js';
import { mergeAllOf } from './sample.js';
import type { JsonValue } from '../shared/json.js';
import type { Rng } from '../shared/rng.js';
import { FORMAT_GENERATORS } from './formats.js';

/** How `generate` draws: how deep it nests, how often it fills optional properties, how many attempts a value gets, and a pool of strings to draw from. */
export interface GenerateOptions {
  /** Beyond this depth only required properties and minimal arrays are generated (recursive schemas end). */
  readonly maxDepth?: number;
  /** Chance that an optional property is present. */
  readonly optionalProbability?: number;
  /** Fresh draws before giving up. */
  readonly attempts?: number;
  /**
   * Strings to draw from for string values without format, pattern or enum. The fuzzer fills it
   * from the case's state, so ids in params name things that exist: `byName` holds the values seen
   * under each property name (a `user_id` param draws from `user_id` fields), `all` every string.
   */
  readonly pool?: { readonly byName: ReadonlyMap<string, readonly string[]>; readonly all: readonly string[] };
}

/** A value drawn from a schema (undefined when none could be), and how many draws missed. */
export interface Generated {
  readonly value?: JsonValue;
  /** Draws the schema rejected before one passed (or all of them, when none did). */
  readonly misses: number;
}

const ALL = ['null', 'boolean', 'integer', 'number', 'string', 'array', 'object'];
const SIMPLEST: readonly JsonValue[] = [null, false, 0, '', [], {}];
const normalized = new WeakMap<object, Schema>();

/** The normalized form of a schema, computed once per schema object. */
export function normalizedOf(root: JsonSchema): Schema {
  if (typeof root === 'boolean') return root;
  let n = normalized.get(root);
  if (n === undefined) {
    n = normalize(root);
    normalized.set(root, n);
  }
  return n;
}

/** Draws a value that satisfies a JSON Schema, deterministically from `rng`. */
export function generate(root: JsonSchema, rng: Rng, options: GenerateOptions = {}): Generated {
  const validator = checkedValidator(root);
  const schema = normalizedOf(root);
  const attempts = options.attempts ?? 12;
  const gen = new Generator(rng, options);
  for (let i = 0; i < attempts; i++) {
    let v: unknown;
    try {
      v = gen.value(schema, 0);
    } catch {
      continue;
    }
    if (validator(v)) return { value: v as JsonValue, misses: i };
  }
  // A schema that constrains objects without saying the value is one admits every other type: the
  // simplest values of each are tried before the faker (`{"allOf": [{"required": ["a"]}, {"unevaluatedProperties": false}]}` takes null).
  for (const v of SIMPLEST) if (validator(v)) return { value: structuredClone(v), misses: attempts };
  // Last resort: the faker, still checked.
  for (let i = 0; i < 3; i++) {
    try {
      const v = generateSync(root as never, { seed: rng.int(1, 2 ** 30) });
      if (validator(v)) return { value: v as JsonValue, misses: attempts + i };
    } catch {
      break;
    }
  }
  return { misses: attempts + 3 };
}

/**
 * The schema's validator, which must answer: ajv's code for some `$dynamicRef` schemas recurses
 * without end, and a value that cannot be checked cannot be generated (nor fuzzed) honestly.
 */
function checkedValidator(root: JsonSchema): (value: unknown) => boolean {
  const validator = compileSchema(root);
  return (value) => {
    try {
      return validator(value);
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      throw new AgentError('DEFINITION_INVALID', 'the schema cannot be checked: its validator (ajv) recurses without end on it (a $dynamicRef or $ref cycle it cannot follow)', { hint: 'Write the recursion with a plain $ref, or leave this schema out of generation and fuzzing.' });
    }
  };
}

class Generator {
  readonly #rng: Rng;
  readonly #maxDepth: number;
  readonly #optional: number;
  readonly #pool: NonNullable<GenerateOptions['pool']>;

  constructor(rng: Rng, options: GenerateOptions) {
    this.#rng = rng;
    this.#maxDepth = options.maxDepth ?? 5;
    this.#optional = options.optionalProbability ?? 0.5;
    this.#pool = options.pool ?? { byName: new Map(), all: [] };
  }

  value(schema: Schema, depth: number, key?: string): unknown {
    if (schema === false) throw new Error('false schema');
    if (schema === true) return this.#any(depth);
    let s = mergeAllOf(schema);
    if ('const' in s) return s['const'];
    if (Array.isArray(s['enum'])) return this.#rng.pick(s['enum']);
    for (const key of ['anyOf', 'oneOf'] as const) {
      if (Array.isArray(s[key])) {
        const { [key]: branches, ...rest } = s;
        const branch = this.#rng.pick(branches as Schema[]);
        if (branch === false) throw new Error('false branch');
        return this.value(branch === true ? rest : mergeAllOf({ allOf: [rest, branch] }), depth, key);
      }
    }
    if (s['if'] !== undefined) {
      const { if: cond, then, else: otherwise, ...rest } = s;
      // Aim at one side of the conditional; ajv decides whether the aim was true.
      const parts = this.#rng.next() < 0.5 ? [rest, cond, then ?? true] : [rest, otherwise ?? true];
      s = mergeAllOf({ allOf: parts.filter((p) => p !== true) as Schema[] });
    }
    const type = this.#pickType(s);
    return this.#ofType(s, type, depth, key);
  }

  #pickType(s: SchemaObject): string {
    const declared = Array.isArray(s['type']) ? (s['type'] as string[]) : undefined;
    if (declared) {
      // Prefer the informative types over null when there is a choice.
      const nonNull = declared.filter((t) => t !== 'null');
      return nonNull.length > 0 && this.#rng.next() < 0.85 ? this.#rng.pick(nonNull) : this.#rng.pick(declared);
    }
    if (['properties', 'required', 'additionalProperties', 'patternProperties', 'minProperties'].some((k) => k in s)) return 'object';
    if (['items', 'prefixItems', 'minItems', 'contains'].some((k) => k in s)) return 'array';
    if (['minLength', 'maxLength', 'pattern', 'format'].some((k) => k in s)) return 'string';
    if (['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'].some((k) => k in s)) return 'number';
    return this.#rng.pick(ALL);
  }

  #any(depth: number): unknown {
    return this.#ofType({}, this.#rng.pick(depth > 2 ? ['null', 'boolean', 'integer', 'string'] : ALL), depth + 1);
  }

  #ofType(s: SchemaObject, type: string, depth: number, key?: string): unknown {
    switch (type) {
      case 'null':
        return null;
      case 'boolean':
        return this.#rng.next() < 0.5;
      case 'integer':
      case 'number':
        return this.#number(s, type === 'integer');
      case 'string':
        return this.#string(s, key);
      case 'array':
        return this.#array(s, depth);
      default:
        return this.#object(s, depth);
    }
  }

  #number(s: SchemaObject, integer: boolean): number {
    const n = (k: string): number | undefined => (typeof s[k] === 'number' ? (s[k] as number) : undefined);
    let lo = n('minimum') ?? -Infinity;
    let hi = n('maximum') ?? Infinity;
    const xlo = n('exclusiveMinimum');
    const xhi = n('exclusiveMaximum');
    const step = n('multipleOf');
    const tiny = integer ? 1 : step ?? 1e-3;
    if (xlo !== undefined && xlo >= lo) lo = xlo + tiny;
    if (xhi !== undefined && xhi <= hi) hi = xhi - tiny;
    if (!Number.isFinite(lo) && !Number.isFinite(hi)) [lo, hi] = [-1000, 1000];
    else if (!Number.isFinite(lo)) lo = hi - 1000;
    else if (!Number.isFinite(hi)) hi = lo + 1000;
    if (step !== undefined) {
      // Pick a whole k with k·step in range and (k·step)/step exact in floating point, as ajv checks it.
      const kmin = Math.ceil(lo / step - 1e-9);
      const kmax = Math.floor(hi / step + 1e-9);
      for (let i = 0; i < 8 && kmin <= kmax; i++) {
        const k = this.#rng.int(kmin, Math.min(kmax, kmin + 10_000));
        const decimals = (String(step).split('.')[1] ?? '').length;
        const v = Number((k * step).toFixed(decimals));
        if (isMultiple(v, step) && (!integer || Number.isInteger(v))) return v;
      }
      return kmin * step;
    }
    if (integer) return this.#rng.int(Math.ceil(lo), Math.floor(hi));
    const v = lo + this.#rng.next() * (hi - lo);
    return Math.round(v * 1000) / 1000;
  }

  #string(s: SchemaObject, key?: string): string {
    const min = typeof s['minLength'] === 'number' ? (s['minLength'] as number) : 0;
    const max = typeof s['maxLength'] === 'number' ? (s['maxLength'] as number) : min + 12;
    const format = typeof s['format'] === 'string' ? FORMAT_GENERATORS[s['format']] : undefined;
    if (format) return format(this.#rng);
    if (typeof s['pattern'] === 'string') {
      const re = safe(s['pattern']);
      for (let i = 0; i < 4; i++) {
        try {
          const v = generateSync({ type: 'string', pattern: s['pattern'], minLength: min, maxLength: max }, { seed: this.#rng.int(1, 2 ** 30) });
          if (typeof v === 'string' && (!re || re.test(v)) && v.length >= min && v.length <= max) return v;
        } catch {
          break;
        }
      }
      // Patterns the faker cannot read (lookaround, \p{…}): try plain candidates against the real regex.
      const pool = ['a', 'A', 'abc', 'Abc', 'é', '中文', '0', '123', 'a1', 'A1b2', 'a-b', 'a_b', 'a.b', 'x@y.z', ' ', 'aaaaaaaa'];
      const hit = pool.map((p) => p.padEnd(min, p)).find((p) => (!re || re.test(p)) && p.length <= max);
      if (hit !== undefined) return hit;
    }
    const named = key === undefined ? undefined : this.#pool.byName.get(key);
    const from = named && this.#rng.next() < 0.7 ? named : this.#rng.next() < 0.3 ? this.#pool.all : [];
    const fits = from.filter((p) => p.length >= min && p.length <= max);
    if (fits.length > 0) return this.#rng.pick(fits);
    const length = this.#rng.int(min, Math.max(min, max));
    let out = '';
    for (let i = 0; i < length; i++) out += String.fromCharCode(97 + this.#rng.int(0, 25));
    return out;
  }

  #array(s: SchemaObject, depth: number): unknown[] {
    const min = typeof s['minItems'] === 'number' ? (s['minItems'] as number) : 0;
    const max = typeof s['maxItems'] === 'number' ? (s['maxItems'] as number) : min + 3;
    const prefix = (s['prefixItems'] as Schema[] | undefined) ?? [];
    // Past the prefix, `unevaluatedItems` governs when `items` is absent (`false`: nothing more).
    const items = (s['items'] as Schema | undefined) ?? (s['unevaluatedItems'] as Schema | undefined) ?? true;
    const contains = s['contains'] as Schema | undefined;
    const minContains = contains === undefined ? 0 : typeof s['minContains'] === 'number' ? (s['minContains'] as number) : 1;
    const maxContains = typeof s['maxContains'] === 'number' ? (s['maxContains'] as number) : Infinity;
    const cap = items === false ? Math.min(max, prefix.length) : max;
    const n = depth >= this.#maxDepth ? Math.max(min, Math.min(prefix.length, cap)) : this.#rng.int(Math.min(min, cap), Math.max(Math.min(min, cap), Math.min(cap, min + 3)));
    const unique = s['uniqueItems'] === true;
    // A unique array over a small finite domain (an enum, booleans, a short integer range) is drawn
    // without replacement: redrawing at random rarely finds the last free values.
    const domain = unique && prefix.length === 0 ? finiteDomain(items) : undefined;
    if (domain) {
      const shuffled = [...domain];
      for (let i = shuffled.length - 1; i > 0; i--) {
        const j = this.#rng.int(0, i);
        [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
      }
      // Values `contains` asks for go first, so the slice keeps them.
      if (contains !== undefined) {
        const matches = compileSchema(contains as JsonSchema);
        shuffled.sort((x, y) => Number(matches(y)) - Number(matches(x)));
      }
      return shuffled.slice(0, Math.min(Math.max(n, minContains), shuffled.length));
    }
    const matches = contains === undefined ? undefined : compileSchema(contains as JsonSchema);
    const out: unknown[] = [];
    const seen = new Set<string>();
    const fresh = (sub: Schema, avoidContains: boolean): unknown => {
      let v = this.value(sub, depth + 1);
      for (let k = 0; k < 8 && ((unique && seen.has(JSON.stringify(v))) || (avoidContains && matches?.(v) === true)); k++) v = this.value(sub, depth + 1);
      return v;
    };
    // The `contains` matches first (as many as minContains asks), then the rest, kept from matching
    // more often than maxContains allows.
    const total = Math.max(n, Math.min(cap, prefix.length + minContains));
    for (let i = 0; i < total; i++) {
      const sub = prefix[i] ?? items;
      if (sub === false) break;
      const containsHere = contains !== undefined && i >= prefix.length && i - prefix.length < minContains;
      const v = containsHere ? this.value(mergeAllOf({ allOf: [sub, contains].filter((x) => x !== true) as Schema[] }), depth + 1) : fresh(sub, false);
      seen.add(JSON.stringify(v));
      out.push(v);
    }
    if (matches && Number.isFinite(maxContains)) {
      for (let i = 0; i < out.length && out.filter((v) => matches(v)).length > maxContains; i++) {
        if (i >= minContains + prefix.length && matches(out[i])) out[i] = fresh(prefix[i] ?? items, true);
      }
    }
    return out;
  }

  #object(s: SchemaObject, depth: number): Record<string, unknown> {
    const props = (s['properties'] as Record<string, Schema> | undefined) ?? {};
    const required = new Set((s['required'] as string[] | undefined) ?? []);
    const out: Record<string, unknown> = {};
    const deep = depth >= this.#maxDepth;
    for (const [key, sub] of Object.entries(props)) {
      if (sub === false) continue;
      if (required.has(key) || (!deep && this.#rng.next() < this.#optional)) out[key] = this.value(sub, depth + 1, key);
    }
    for (const key of required) {
      if (!(key in out)) out[key] = this.value(this.#forKey(s, key), depth + 1, key);
    }
    const dependent = (s['dependentRequired'] as Record<string, string[]> | undefined) ?? {};
    for (const [trigger, deps] of Object.entries(dependent)) {
      if (trigger in out) for (const d of deps) if (!(d in out)) out[d] = this.value(this.#forKey(s, d), depth + 1);
    }
    const patterns = (s['patternProperties'] as Record<string, Schema> | undefined) ?? {};
    if (!deep && this.#rng.next() < 0.3) {
      for (const [pattern, sub] of Object.entries(patterns)) {
        try {
          const key = generateSync({ type: 'string', pattern, minLength: 1, maxLength: 12 }, { seed: this.#rng.int(1, 2 ** 30) });
          if (typeof key === 'string' && !(key in out)) out[key] = this.value(sub, depth + 1);
        } catch {
          // a pattern the faker cannot read: leave such keys out
        }
      }
    }
    const minProps = typeof s['minProperties'] === 'number' ? (s['minProperties'] as number) : 0;
    const names = s['propertyNames'] as Schema | undefined;
    const patternList = Object.keys(patterns);
    for (let i = 0; Object.keys(out).length < minProps && i < minProps + 8; i++) {
      // New keys: declared ones first, then keys a pattern admits (the only ones a closed object
      // with patternProperties takes), then keys that satisfy propertyNames.
      let candidate = Object.keys(props).find((k) => !(k in out));
      if (candidate === undefined && patternList.length > 0 && (s['additionalProperties'] === false || this.#rng.next() < 0.5)) {
        try {
          const k = generateSync({ type: 'string', pattern: this.#rng.pick(patternList), minLength: 1, maxLength: 16 }, { seed: this.#rng.int(1, 2 ** 30) });
          if (typeof k === 'string') candidate = k;
        } catch {
          // a pattern the faker cannot read: fall through
        }
      }
      candidate ??= names !== undefined && names !== true ? String(this.value(names, depth + 1)) : `key_${i}`;
      if (!(candidate in out)) out[candidate] = this.value(this.#forKey(s, candidate), depth + 1);
    }
    return out;
  }

  #forKey(s: SchemaObject, key: string): Schema {
    const props = (s['properties'] as Record<string, Schema> | undefined) ?? {};
    if (Object.hasOwn(props, key)) return props[key] as Schema;
    for (const [re, sub] of Object.entries((s['patternProperties'] as Record<string, Schema> | undefined) ?? {})) if (safe(re)?.test(key)) return sub;
    const extra = s['additionalProperties'];
    return extra === undefined || extra === false ? true : (extra as Schema);
  }
}

/** Within ajv's `multipleOfPrecision` (see ajv.ts): 0.3 is a multiple of 0.1. */
function isMultiple(v: number, step: number): boolean {
  const q = v / step;
  return Math.abs(Math.round(q) - q) < 1e-9;
}

/** The values of a small finite domain (enum, const, boolean, a short integer range), or undefined. */
function finiteDomain(schema: Schema): unknown[] | undefined {
  if (typeof schema === 'boolean') return undefined;
  const s = mergeAllOf(schema);
  if ('const' in s) return [s['const']];
  if (Array.isArray(s['enum'])) return s['enum'].filter((v, i, all) => all.findIndex((w) => JSON.stringify(w) === JSON.stringify(v)) === i);
  const types = Array.isArray(s['type']) ? (s['type'] as string[]) : typeof s['type'] === 'string' ? [s['type']] : [];
  if (types.length === 1 && types[0] === 'boolean') return [true, false];
  if (types.length === 1 && types[0] === 'integer') {
    const lo = typeof s['minimum'] === 'number' ? Math.ceil(s['minimum']) : typeof s['exclusiveMinimum'] === 'number' ? Math.floor(s['exclusiveMinimum']) + 1 : undefined;
    const hi = typeof s['maximum'] === 'number' ? Math.floor(s['maximum']) : typeof s['exclusiveMaximum'] === 'number' ? Math.ceil(s['exclusiveMaximum']) - 1 : undefined;
    if (lo === undefined || hi === undefined || hi - lo > 64) return undefined;
    const step = typeof s['multipleOf'] === 'number' ? s['multipleOf'] : 1;
    return Array.from({ length: hi - lo + 1 }, (_, i) => lo + i).filter((v) => isMultiple(v, step));
  }
  return undefined;
}

function safe(source: string): RegExp | undefined {
  try {
    return new RegExp(source, 'u');
  } catch {
    return undefined;
  }
}

