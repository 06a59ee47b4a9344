/**
 * Small, deterministic sample values of a normalized schema (cycles allowed), used as the
 * surroundings of a witness. They need not be valid on their own: every witness is checked
 * with ajv against the real schemas before it is reported.
 */
import { generateSync } from 'json-schema-faker';
import { isPlainObject } from '../shared/json.js';
import type { Schema, SchemaObject } from '../schema/normalize.js';

const FORMAT_EXAMPLES: Readonly<Record<string, string>> = {
  'date-time': '2024-05-01T12:00:00Z',
  date: '2024-05-01',
  time: '12:00:00Z',
  email: 'a@example.com',
  uri: 'https://example.com/',
  'uri-reference': '/x',
  uuid: '123e4567-e89b-12d3-a456-426614174000',
  ipv4: '192.0.2.1',
  ipv6: '2001:db8::1',
  hostname: 'example.com',
};

export function typesOf(s: SchemaObject): string[] {
  const t = s['type'];
  return Array.isArray(t) ? (t as string[]) : ['null', 'boolean', 'object', 'array', 'number', 'integer', 'string'];
}

/** The type a sample of an untyped schema should have, judged by its keywords. */
function impliedType(s: SchemaObject): string | undefined {
  if (['properties', 'required', 'additionalProperties', 'minProperties', 'dependentRequired'].some((k) => k in s)) return 'object';
  if (['items', 'prefixItems', 'minItems', 'contains', 'uniqueItems'].some((k) => k in s)) return 'array';
  if (['minLength', 'maxLength', 'pattern', 'format'].some((k) => k in s)) return 'string';
  if (['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'].some((k) => k in s)) return 'number';
  return undefined;
}

/** A sample of the schema, preferring `type` when given. */
export function sample(schema: Schema, type?: string, depth = 0): unknown {
  if (schema === false) return undefined;
  if (schema === true || depth > 8) return type === undefined ? null : sampleOfType({}, type, depth);
  if ('const' in schema) return schema['const'];
  if (Array.isArray(schema['enum']) && schema['enum'].length > 0) return schema['enum'][0];
  const merged = mergeAllOf(schema);
  if (Array.isArray(merged['anyOf']) || Array.isArray(merged['oneOf'])) {
    const branches = (merged['anyOf'] ?? merged['oneOf']) as Schema[];
    const { anyOf: _a, oneOf: _o, ...rest } = merged;
    const first = branches[0];
    return sample(isPlainObject(first) ? { ...rest, ...first } : (first ?? true), type, depth + 1);
  }
  const types = typesOf(merged);
  const implied = merged['type'] === undefined ? impliedType(merged) : undefined;
  const chosen = type && types.includes(type) ? type : (implied ?? types.find((t) => t !== 'null') ?? types[0] ?? 'null');
  return sampleOfType(merged, chosen, depth);
}

export function sampleOfType(s: SchemaObject, type: string, depth = 0): unknown {
  const num = (k: string): number | undefined => (typeof s[k] === 'number' ? (s[k] as number) : undefined);
  switch (type) {
    case 'null':
      return null;
    case 'boolean':
      return true;
    case 'integer':
    case 'number': {
      const step = num('multipleOf');
      let lo = num('minimum') ?? (num('exclusiveMinimum') !== undefined ? (num('exclusiveMinimum') as number) + (type === 'integer' ? 1 : 0.5) : undefined);
      const hi = num('maximum') ?? (num('exclusiveMaximum') !== undefined ? (num('exclusiveMaximum') as number) - (type === 'integer' ? 1 : 0.5) : undefined);
      lo ??= hi !== undefined ? Math.min(0, hi) : 0;
      let v = type === 'integer' ? Math.ceil(lo) : lo;
      if (step) v = Math.ceil(v / step) * step;
      return v;
    }
    case 'string': {
      const format = typeof s['format'] === 'string' ? FORMAT_EXAMPLES[s['format']] : undefined;
      if (format) return format;
      if (typeof s['pattern'] === 'string') {
        try {
          const v = generateSync({ type: 'string', pattern: s['pattern'], ...(num('minLength') !== undefined ? { minLength: num('minLength') } : {}), ...(num('maxLength') !== undefined ? { maxLength: num('maxLength') } : {}) }, { seed: 7 });
          if (typeof v === 'string') return v;
        } catch {
          // fall through to a plain string
        }
      }
      return 'a'.repeat(Math.max(num('minLength') ?? 1, 1));
    }
    case 'array': {
      const prefix = Array.isArray(s['prefixItems']) ? (s['prefixItems'] as Schema[]) : [];
      const n = Math.max(num('minItems') ?? 0, prefix.length);
      const out: unknown[] = [];
      for (let i = 0; i < n; i++) out.push(sample(prefix[i] ?? (s['items'] as Schema | undefined) ?? true, undefined, depth + 1));
      return out;
    }
    case 'object': {
      const out: Record<string, unknown> = {};
      const props = isPlainObject(s['properties']) ? (s['properties'] as Record<string, Schema>) : {};
      const required = Array.isArray(s['required']) ? (s['required'] as string[]) : [];
      for (const key of required) out[key] = sample(props[key] ?? (s['additionalProperties'] as Schema | undefined) ?? true, undefined, depth + 1);
      return out;
    }
    default:
      return null;
  }
}

/** Fold `allOf` branches into their parent (shallow; properties by key, required as a union). */
export function mergeAllOf(s: SchemaObject): SchemaObject {
  if (!Array.isArray(s['allOf'])) return s;
  const { allOf, ...rest } = s;
  let out: SchemaObject = { ...rest };
  for (const raw of allOf as Schema[]) {
    if (raw === false) return { not: {} };
    if (!isPlainObject(raw)) continue;
    out = mergeTwo(out, mergeAllOf(raw));
  }
  return out;
}

const LOWER_BOUNDS = ['minimum', 'exclusiveMinimum', 'minLength', 'minItems', 'minProperties', 'minContains'];
const UPPER_BOUNDS = ['maximum', 'exclusiveMaximum', 'maxLength', 'maxItems', 'maxProperties', 'maxContains'];
/** Subschema keywords: two of them on one value both apply, so they are combined with `allOf`. */
const SUBSCHEMAS = ['items', 'additionalProperties', 'unevaluatedProperties', 'unevaluatedItems', 'contains', 'propertyNames', 'not', 'if'];

/**
 * Both schemas at once, as one schema a generator can aim at: bounds tightened, types and enums
 * intersected, required and properties united, nested schemas combined with `allOf` (merged when
 * their value is generated). What cannot be merged exactly (two patterns, two formats) keeps the
 * first; every generated value is still checked against the real schema.
 */
function mergeTwo(a: SchemaObject, b: SchemaObject): SchemaObject {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    if (prev === undefined) {
      out[k] = v;
      continue;
    }
    if (LOWER_BOUNDS.includes(k) && typeof v === 'number' && typeof prev === 'number') out[k] = Math.max(prev, v);
    else if (UPPER_BOUNDS.includes(k) && typeof v === 'number' && typeof prev === 'number') out[k] = Math.min(prev, v);
    else if (k === 'type') out[k] = intersectTypes(prev, v);
    else if (k === 'enum' && Array.isArray(prev) && Array.isArray(v)) out[k] = prev.filter((x) => v.some((y) => JSON.stringify(x) === JSON.stringify(y)));
    else if (k === 'required' && Array.isArray(prev) && Array.isArray(v)) out[k] = [...new Set([...(prev as string[]), ...(v as string[])])];
    else if ((k === 'properties' || k === 'patternProperties' || k === 'dependentSchemas') && isPlainObject(prev) && isPlainObject(v)) {
      const merged: Record<string, unknown> = { ...prev };
      for (const [name, sub] of Object.entries(v)) merged[name] = merged[name] === undefined ? sub : { allOf: [merged[name], sub] };
      out[k] = merged;
    } else if (k === 'multipleOf' && typeof v === 'number' && typeof prev === 'number') {
      const q = Math.max(prev, v) / Math.min(prev, v);
      out[k] = Math.abs(Math.round(q) - q) < 1e-9 ? Math.max(prev, v) : prev * v;
    } else if (k === 'uniqueItems') out[k] = prev === true || v === true;
    else if (SUBSCHEMAS.includes(k)) out[k] = { allOf: [prev, v] };
    else if (k === 'pattern' || k === 'format' || k === 'const') continue;
    else out[k] = v;
  }
  return out;
}

function intersectTypes(a: unknown, b: unknown): unknown {
  const list = (t: unknown): string[] => (Array.isArray(t) ? (t as string[]) : typeof t === 'string' ? [t] : []);
  const bs = list(b);
  const both = list(a).flatMap((t) => (bs.includes(t) ? [t] : t === 'number' && bs.includes('integer') ? ['integer'] : t === 'integer' && bs.includes('number') ? ['integer'] : []));
  // Normalized schemas spell `type` as a list; keep that form.
  return [...new Set(both)];
}
