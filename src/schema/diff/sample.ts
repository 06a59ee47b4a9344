/**
 * Small, deterministic sample values of a normalized schema (cycles allowed), used as the
 * surroundings of a witness. They need not be valid on their own: every witness is checked
 * with ajv against the real schemas before it is reported.
 */
import { generateSync } from 'json-schema-faker';
import { isPlainObject } from '../../shared/json.js';
import type { Schema, SchemaObject } from './normalize.js';

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
    if (!isPlainObject(raw)) continue;
    const b = mergeAllOf(raw);
    const props = { ...(out['properties'] as Record<string, Schema> | undefined) };
    for (const [k, v] of Object.entries((b['properties'] as Record<string, Schema> | undefined) ?? {})) props[k] = props[k] === undefined ? v : { allOf: [props[k], v] };
    const required = [...new Set([...((out['required'] as string[] | undefined) ?? []), ...((b['required'] as string[] | undefined) ?? [])])];
    out = { ...out, ...b, ...(Object.keys(props).length > 0 ? { properties: props } : {}), ...(required.length > 0 ? { required } : {}) };
    if (Array.isArray(rest['type']) && Array.isArray(b['type'])) out['type'] = (rest['type'] as string[]).filter((t) => (b['type'] as string[]).includes(t));
  }
  return out;
}
