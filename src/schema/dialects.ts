/**
 * Dialect conversions for tool-parameter schemas that are not JSON Schema.
 *
 * BFCL (Berkeley Function Calling Leaderboard) writes `"type": "dict"`, `"float"`, `"tuple"`,
 * `"any"`, Java and JavaScript type names, and an `optional` keyword. With `dialect: "bfcl"`
 * those are mapped by BFCL's own GORILLA_TO_OPENAPI table (so `any` becomes `string`, exactly as
 * BFCL scores it) and `optional`/`response` are dropped. Without it, such a schema is refused
 * with a hint that names this option.
 */
import { isPlainObject } from '../shared/json.js';
import { didYouMean } from './ajv.js';
import { escapePointerToken } from '../shared/json.js';

/** The dialect of an action document: JSON Schema (ours, OpenAI, MCP) or BFCL's. */
export type SchemaDialect = 'json-schema' | 'bfcl';

const JSON_SCHEMA_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']);

/** BFCL's GORILLA_TO_OPENAPI, plus `Boolean` and the empty type name that its data also uses. */
const BFCL_TYPES: Readonly<Record<string, string>> = {
  integer: 'integer',
  number: 'number',
  float: 'number',
  string: 'string',
  boolean: 'boolean',
  bool: 'boolean',
  array: 'array',
  list: 'array',
  dict: 'object',
  object: 'object',
  tuple: 'array',
  any: 'string',
  byte: 'integer',
  short: 'integer',
  long: 'integer',
  double: 'number',
  char: 'string',
  ArrayList: 'array',
  Array: 'array',
  HashMap: 'object',
  Hashtable: 'object',
  Queue: 'array',
  Stack: 'array',
  String: 'string',
  Any: 'string',
  Boolean: 'boolean',
  '': 'string',
};

const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];
const SCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SCHEMA_SINGLES = ['items', 'additionalProperties', 'contains', 'not', 'if', 'then', 'else', 'propertyNames', 'additionalItems'];

/** Visit every subschema with its JSON pointer (relative to the root schema). */
export function walkSchemas(schema: unknown, visit: (node: Record<string, unknown>, pointer: string) => void, pointer = ''): void {
  if (!isPlainObject(schema)) return;
  visit(schema, pointer);
  for (const key of SCHEMA_MAPS) {
    const map = schema[key];
    if (isPlainObject(map)) for (const [k, v] of Object.entries(map)) walkSchemas(v, visit, `${pointer}/${key}/${escapePointerToken(k)}`);
  }
  for (const key of SCHEMA_LISTS) {
    const list = schema[key];
    if (Array.isArray(list)) list.forEach((v, i) => walkSchemas(v, visit, `${pointer}/${key}/${i}`));
  }
  for (const key of SCHEMA_SINGLES) {
    const v = schema[key];
    if (Array.isArray(v)) v.forEach((x, i) => walkSchemas(x, visit, `${pointer}/${key}/${i}`));
    else walkSchemas(v, visit, `${pointer}/${key}`);
  }
}

/** Why a `type` is refused and what to write instead: BFCL's dialect for one of BFCL's names, else the JSON Schema type it is a typo of (`integr` → `integer`), else the list. */
export function foreignTypeMessage(type: string, dialect: SchemaDialect): string {
  if (dialect !== 'bfcl' && Object.hasOwn(BFCL_TYPES, type)) return `type '${type}' is not a JSON Schema type. It looks like BFCL's dialect: set "dialect": "bfcl" in env.json (or pass dialect: 'bfcl') to convert it`;
  const guess = didYouMean(type, [...JSON_SCHEMA_TYPES]);
  const what = `type '${type}' is not a JSON Schema type${dialect === 'bfcl' ? ' (nor a BFCL one)' : ''}`;
  return guess !== undefined ? `${what}: did you mean '${guess}'?` : `${what}: use one of ${[...JSON_SCHEMA_TYPES].join(', ')}`;
}

/** Pointers (with the offending name) of every `type` that is not a JSON Schema type. */
export function findForeignTypes(schema: unknown): { pointer: string; type: string }[] {
  const found: { pointer: string; type: string }[] = [];
  walkSchemas(schema, (node, pointer) => {
    const t = node['type'];
    for (const name of Array.isArray(t) ? t : [t]) {
      if (typeof name === 'string' && !JSON_SCHEMA_TYPES.has(name)) found.push({ pointer: `${pointer}/type`, type: name });
    }
  });
  return found;
}

/** A converted deep copy of a BFCL-dialect parameter schema. Unknown type names are left for the validator to report. */
export function convertBfclSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(convertBfclSchema);
  if (!isPlainObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'optional' || key === 'response') continue;
    if (key === 'type') out[key] = Array.isArray(value) ? value.map(mapType) : mapType(value);
    else if (SCHEMA_MAPS.includes(key) && isPlainObject(value)) out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, convertBfclSchema(v)]));
    else if (SCHEMA_LISTS.includes(key) || SCHEMA_SINGLES.includes(key)) out[key] = convertBfclSchema(value);
    else out[key] = value;
  }
  return out;
}

function mapType(t: unknown): unknown {
  return typeof t === 'string' && Object.hasOwn(BFCL_TYPES, t) ? BFCL_TYPES[t] : t;
}
