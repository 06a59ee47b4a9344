/**
 * Invalid variants of a valid value, and boundary values, each tied to the JSON pointer it
 * exercises. Every mutant is checked with ajv: an "invalid" mutant the schema accepts is dropped
 * (the schema does not constrain what the mutator assumed), and a boundary meant to be inside the
 * schema that fails is dropped too.
 */
import { compileSchema, type JsonSchema } from '../schema/ajv.js';
import type { Schema, SchemaObject } from '../schema/normalize.js';
import { normalizedOf } from '../generate/generate.js';
import { mergeAllOf } from '../generate/sample.js';
import { escapePointerToken, isPlainObject, type JsonValue } from '../shared/json.js';
import type { Rng } from '../shared/rng.js';
import { FORMAT_BREAKERS } from '../generate/formats.js';

export type Mutation =
  | 'wrong-type'
  | 'missing-required'
  | 'extra-key-on-closed-object'
  | 'out-of-range'
  | 'not-a-multiple'
  | 'too-long'
  | 'too-short'
  | 'too-many-items'
  | 'too-few-items'
  | 'duplicate-items'
  | 'pattern-broken'
  | 'format-broken'
  | 'enum-miss'
  | 'one-of-no-branch'
  /** No targeted mutator applied: a value from the schema's complement, where ajv says it fails. */
  | 'complement';

/** A boundary or mutated value of a schema: the value, where it differs (pointer), how (mutation), and whether the schema should accept it. */
export interface Variant {
  readonly value: JsonValue;
  /** JSON pointer of the value that was changed. */
  readonly pointer: string;
  readonly mutation: Mutation | 'boundary-inside' | 'boundary-outside';
  /** Whether the schema accepts it (checked). */
  readonly valid: boolean;
}

interface Site {
  readonly schema: SchemaObject;
  readonly value: unknown;
  readonly tokens: readonly string[];
}

/** Probe values of every JSON type; a wrong-type mutant uses the first one the schema's `type` does not allow. */
const WRONG_TYPE_PROBES: readonly JsonValue[] = ['not a number', 12345, 0.5, true, { not: 'a string' }, ['x'], null];

function jsonType(x: unknown): string {
  if (x === null) return 'null';
  if (Array.isArray(x)) return 'array';
  if (typeof x === 'number') return Number.isInteger(x) ? 'integer' : 'number';
  return typeof x;
}

/** Every (schema node, value) pair of a valid value, with its path. */
function sites(root: Schema, value: unknown): Site[] {
  const out: Site[] = [];
  const walk = (s: Schema, v: unknown, tokens: string[], depth: number): void => {
    if (typeof s === 'boolean' || depth > 12) return;
    const m = mergeAllOf(s);
    out.push({ schema: m, value: v, tokens });
    if (isPlainObject(v)) {
      const props = (m['properties'] as Record<string, Schema> | undefined) ?? {};
      for (const [k, child] of Object.entries(v)) walk(props[k] ?? ((m['additionalProperties'] as Schema | undefined) ?? true), child, [...tokens, k], depth + 1);
    } else if (Array.isArray(v)) {
      const prefix = (m['prefixItems'] as Schema[] | undefined) ?? [];
      v.forEach((child, i) => walk(prefix[i] ?? ((m['items'] as Schema | undefined) ?? true), child, [...tokens, String(i)], depth + 1));
    }
  };
  walk(root, value, [], 0);
  return out;
}

function setAt(root: unknown, tokens: readonly string[], value: unknown): JsonValue {
  if (tokens.length === 0) return value as JsonValue;
  const [head, ...rest] = tokens as [string, ...string[]];
  if (Array.isArray(root)) return root.map((v, i) => (String(i) === head ? setAt(v, rest, value) : v)) as JsonValue;
  const obj = isPlainObject(root) ? root : {};
  return { ...obj, [head]: setAt(obj[head], rest, value) } as JsonValue;
}

function num(s: SchemaObject, k: string): number | undefined {
  return typeof s[k] === 'number' ? (s[k] as number) : undefined;
}

/** Candidate changes at one site: [mutation, new value at the site, the key the violation is at (if below the site)]. */
function candidates(site: Site, rng: Rng): [Variant['mutation'], unknown, string?][] {
  const { schema: s, value: v } = site;
  const out: [Variant['mutation'], unknown, string?][] = [];
  const types = Array.isArray(s['type']) ? (s['type'] as string[]) : undefined;
  if (types) {
    const accepted = (t: string): boolean => types.includes(t) || (t === 'integer' && types.includes('number'));
    const wrong = WRONG_TYPE_PROBES.find((c) => !accepted(jsonType(c)));
    if (wrong !== undefined) out.push(['wrong-type', wrong]);
  }
  if (Array.isArray(s['enum']) || 'const' in s) out.push(['enum-miss', typeof v === 'number' ? 987654.321 : '__not_in_enum__']);
  if (Array.isArray(s['oneOf']) || Array.isArray(s['anyOf'])) out.push(['one-of-no-branch', { __matches_no_branch__: true }]);
  if (typeof v === 'number') {
    const step = num(s, 'multipleOf') ?? (types?.includes('integer') ? 1 : 0.5);
    const max = num(s, 'maximum');
    const min = num(s, 'minimum');
    if (max !== undefined) out.push(['out-of-range', max + step]);
    if (min !== undefined) out.push(['out-of-range', min - step]);
    if (num(s, 'exclusiveMaximum') !== undefined) out.push(['out-of-range', num(s, 'exclusiveMaximum')]);
    if (num(s, 'exclusiveMinimum') !== undefined) out.push(['out-of-range', num(s, 'exclusiveMinimum')]);
    const m = num(s, 'multipleOf');
    if (m !== undefined) out.push(['not-a-multiple', v + m / 2]);
  }
  if (typeof v === 'string') {
    const max = num(s, 'maxLength');
    const min = num(s, 'minLength');
    if (max !== undefined) out.push(['too-long', 'a'.repeat(max + 1)]);
    if (min !== undefined && min > 0) out.push(['too-short', 'a'.repeat(min - 1)]);
    if (typeof s['pattern'] === 'string') for (const c of ['', ' ', '!!', '\n', 'ZZZ-999', '0']) out.push(['pattern-broken', c]);
    if (typeof s['format'] === 'string') for (const c of FORMAT_BREAKERS) out.push(['format-broken', c]);
  }
  if (Array.isArray(v)) {
    const max = num(s, 'maxItems');
    const min = num(s, 'minItems');
    if (max !== undefined) out.push(['too-many-items', [...v, ...Array.from({ length: max + 1 - v.length }, () => v[0] ?? null)]]);
    if (min !== undefined && min > 0) out.push(['too-few-items', v.slice(0, min - 1)]);
    if (s['uniqueItems'] === true && v.length > 0) out.push(['duplicate-items', [...v, v[0]]]);
  }
  if (isPlainObject(v)) {
    for (const key of (s['required'] as string[] | undefined) ?? []) {
      out.push(['missing-required', Object.fromEntries(Object.entries(v).filter(([k]) => k !== key)), key]);
    }
    const extra = `unexpected_${rng.int(0, 99)}`;
    if (s['additionalProperties'] === false) out.push(['extra-key-on-closed-object', { ...v, [extra]: 1 }, extra]);
  }
  return out;
}

/** Invalid variants of `valid`, each confirmed invalid by ajv; at most `limit`, shuffled. */
export function mutants(root: JsonSchema, valid: JsonValue, rng: Rng, limit = 24): Variant[] {
  const validator = compileSchema(root);
  const out: Variant[] = [];
  const all = sites(normalizedOf(root), valid).flatMap((site) => candidates(site, rng).map(([mutation, v, key]) => ({ site, mutation, v, key })));
  for (let i = all.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [all[i], all[j]] = [all[j] as (typeof all)[number], all[i] as (typeof all)[number]];
  }
  for (const { site, mutation, v, key } of all) {
    if (out.length >= limit) break;
    const value = setAt(valid, site.tokens, v);
    const tokens = key === undefined ? site.tokens : [...site.tokens, key];
    if (!validator(value)) out.push({ value, pointer: tokens.map((t) => `/${escapePointerToken(t)}`).join(''), mutation, valid: false });
  }
  return out.length > 0 ? out : complement(root, valid, rng, limit);
}

/** Values of every JSON type, including the empty and the extreme ones. */
const COMPLEMENT_PROBES: readonly JsonValue[] = [...WRONG_TYPE_PROBES, '', 0, -1, 1e9, -1e9, [], [null], [0], ['zz'], {}, { zz: 1 }];

/**
 * Probes drawn from what the schema names, for keywords a valid value of another type never meets
 * (a schema without `type` is satisfied by `null`, which no edit of `null` breaks): objects holding
 * each property the schema mentions (`properties`, `required`, `dependentRequired`,
 * `dependentSchemas`) with values of each type, all of them at once; and one past every count
 * bound (`maxItems`, `maxContains`, `maxProperties`), duplicates for `uniqueItems`.
 */
function schemaProbes(root: Schema): JsonValue[] {
  const keys = new Set<string>();
  const counts = new Set<number>();
  const seen = new Set<object>();
  const walk = (node: unknown): void => {
    if (typeof node !== 'object' || node === null || seen.has(node)) return;
    seen.add(node);
    if (Array.isArray(node)) return node.forEach(walk);
    const o = node as Record<string, unknown>;
    for (const k of ['properties', 'dependentSchemas', 'dependentRequired']) if (isPlainObject(o[k])) for (const name of Object.keys(o[k] as object)) keys.add(name);
    for (const list of [o['required'], ...(isPlainObject(o['dependentRequired']) ? Object.values(o['dependentRequired'] as object) : [])]) if (Array.isArray(list)) for (const name of list) if (typeof name === 'string') keys.add(name);
    for (const k of ['maxItems', 'maxContains', 'maxProperties']) if (typeof o[k] === 'number' && (o[k] as number) < 64) counts.add(Math.floor(o[k] as number) + 1);
    // A name each pattern matches (a regex's literal part, as most are written: `^x-`, `f.*o`).
    if (isPlainObject(o['patternProperties'])) for (const re of Object.keys(o['patternProperties'] as object)) keys.add(re.replace(/\\(.)/g, '$1').replace(/[\^$]|\.\*|\.\+|[.*+?()[\]{}|]/g, '') || 'a');
    Object.values(o).forEach(walk);
  };
  walk(root);
  const values: JsonValue[] = [null, 1, 'x', true, {}, []];
  const named = [...keys].slice(0, 24);
  return [
    ...named.flatMap((k) => values.map((v) => ({ [k]: v }))),
    ...values.map((v) => Object.fromEntries(named.map((k) => [k, v]))),
    ...[...counts].flatMap((n) => [Array.from({ length: n }, () => 1), Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 1]))]),
    [1, 1],
    [{}, {}],
    // Names for `propertyNames`: empty, long, odd.
    { '': 1 },
    { ['x'.repeat(40)]: 1 },
    { '0 !': 1 },
  ];
}

/**
 * Invalid values where no targeted mutator applies (`contains`, `if/then/else`, `propertyNames`,
 * `unevaluated*`, `dependent*`, a schema without `type`…): at every node of a valid value, probes
 * of every type and small edits (a key dropped or added, an element dropped, added or repeated),
 * kept when ajv rejects them. The pointer is where ajv says the value fails.
 */
function complement(root: JsonSchema, valid: JsonValue, rng: Rng, limit: number): Variant[] {
  const validator = compileSchema(root);
  const out: Variant[] = [];
  const edits = (v: unknown): unknown[] => {
    if (Array.isArray(v)) return [v.slice(1), [...v, v[0] ?? null], [...v, 0], [...v, 'zz'], v.slice(0, -1)];
    if (isPlainObject(v)) return [...Object.keys(v).map((k) => Object.fromEntries(Object.entries(v).filter(([j]) => j !== k))), { ...v, ZZ: 1 }, { ...v, zz: null }];
    return [];
  };
  const tried = new Set<string>();
  const derived = schemaProbes(normalizedOf(root));
  search: for (const site of sites(normalizedOf(root), valid).reverse()) {
    for (const candidate of [...edits(site.value), ...COMPLEMENT_PROBES, ...derived]) {
      if (out.length >= limit) break search;
      const value = setAt(valid, site.tokens, candidate);
      const key = JSON.stringify(value);
      if (tried.has(key)) continue;
      tried.add(key);
      if (validator(value)) continue;
      const first = validator.errors?.[0];
      out.push({ value, pointer: first?.instancePath ?? '', mutation: 'complement', valid: false });
    }
  }
  // Shuffled like the targeted mutants, so a sample of them is not always the deepest site.
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [out[i], out[j]] = [out[j] as Variant, out[i] as Variant];
  }
  return out;
}

/** Values just inside and just outside every numeric, length and item-count bound of `valid`'s nodes. */
export function boundaries(root: JsonSchema, valid: JsonValue): Variant[] {
  const validator = compileSchema(root);
  const out: Variant[] = [];
  for (const site of sites(normalizedOf(root), valid)) {
    const s = site.schema;
    const v = site.value;
    const pointer = site.tokens.map((t) => `/${escapePointerToken(t)}`).join('');
    const pairs: [unknown, boolean][] = [];
    if (typeof v === 'number') {
      const integer = Array.isArray(s['type']) && (s['type'] as string[]).includes('integer') && !(s['type'] as string[]).includes('number');
      const step = num(s, 'multipleOf') ?? (integer ? 1 : 0.001);
      for (const [k, inside, outside] of [
        ['minimum', 0, -step],
        ['maximum', 0, step],
        ['exclusiveMinimum', step, 0],
        ['exclusiveMaximum', -step, 0],
      ] as const) {
        const b = num(s, k);
        if (b !== undefined) pairs.push([b + inside, true], [b + outside, false]);
      }
    } else if (typeof v === 'string') {
      const min = num(s, 'minLength');
      const max = num(s, 'maxLength');
      const fill = (n: number): string => (v.length > 0 ? v.repeat(Math.ceil(n / v.length)).slice(0, n) : 'a'.repeat(n));
      if (min !== undefined) pairs.push([fill(min), true], ...(min > 0 ? ([[fill(min - 1), false]] as [unknown, boolean][]) : []));
      if (max !== undefined) pairs.push([fill(max), true], [fill(max + 1), false]);
    } else if (Array.isArray(v)) {
      const min = num(s, 'minItems');
      const max = num(s, 'maxItems');
      const resize = (n: number): unknown[] => Array.from({ length: n }, (_, i) => v[i % Math.max(1, v.length)] ?? null);
      if (min !== undefined) pairs.push([resize(min), true], ...(min > 0 ? ([[resize(min - 1), false]] as [unknown, boolean][]) : []));
      if (max !== undefined && max < 1000) pairs.push([resize(max), true], [resize(max + 1), false]);
    }
    for (const [candidate, inside] of pairs) {
      const value = setAt(valid, site.tokens, candidate);
      // Keep only those whose verdict matches the intent; the rest say nothing about the bound.
      if (validator(value) === inside) out.push({ value, pointer, mutation: inside ? 'boundary-inside' : 'boundary-outside', valid: inside });
    }
  }
  return out;
}
