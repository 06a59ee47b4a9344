/**
 * Validation through the toolkit's one ajv (set up in ajv-setup.ts). JSON Schema 2020-12 is the
 * default dialect; draft-07 is accepted too, because real tool schemas (every MCP TypeScript
 * server) declare it in `$schema`. `strict: false` because real schemas carry vendor keywords
 * (`enabled_if`, `delay_ms`, BFCL's leftovers) that are annotations, not errors. Compiled validators
 * are cached per schema object; the meta-schemas' come compiled ahead (meta-validators.generated.ts).
 */
import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import type { DataValidationCxt } from 'ajv/dist/types/index.js';
import { escapePointerToken, parsePointer } from '../shared/json.js';
import type { Issue } from '../shared/errors.js';
import { createAjv } from './ajv-setup.js';
import { draft07, draft2020 } from './meta-validators.generated.js';

/** A JSON Schema as found in the wild: an object, or a boolean schema. */
export type JsonSchema = boolean | { readonly [keyword: string]: unknown };

const ajv = createAjv();
const cache = new WeakMap<object, ValidateFunction>();
const booleanValidators = new Map<boolean, ValidateFunction>();

/**
 * The second argument of ajv's validators, shared. Called without one, a validator builds its
 * default (two objects per call: with the params, each patched path and the rewards validated,
 * 260 bytes of garbage a step before the optimiser runs). Given only to validators that never
 * write into it: their schema's document has no dynamic anchor and refers to nothing outside
 * itself ({@link reachOf}). Frozen, so that no call could leave anything for the next.
 */
const SHARED_CONTEXT = Object.freeze({ instancePath: '', dynamicAnchors: Object.freeze({}) }) as unknown as DataValidationCxt;
const ownContext = new WeakSet<ValidateFunction>();

/** Whether `value` is valid; what `validator(value)` answers (its `errors` set as usual), with less garbage. */
export function isValid(validator: ValidateFunction, value: unknown): boolean {
  return ownContext.has(validator) ? validator(value, SHARED_CONTEXT) : validator(value);
}

/**
 * How far a schema reaches: `alone`, it refers to nothing and nothing refers into it (it compiles
 * on its own); `document`, its references stay inside its document and it has no dynamic anchor
 * (its validator never writes into its context); `open`, anything else.
 */
function reachOf(node: JsonSchema): 'alone' | 'document' | 'open' {
  if (typeof node === 'boolean') return 'alone';
  let reach: 'alone' | 'document' = 'alone';
  for (const key in node) {
    const value = node[key];
    if (key === '$dynamicAnchor' || key === '$recursiveAnchor') return 'open';
    if (key === '$ref' || key === '$dynamicRef' || key === '$recursiveRef') {
      if (!(typeof value === 'string' && value.startsWith('#'))) return 'open';
      reach = 'document';
    } else if (key === '$id' || key === '$anchor') reach = 'document';
    for (const child of Array.isArray(value) ? value : [value]) {
      if (typeof child !== 'object' || child === null) continue;
      const inner = reachOf(child as JsonSchema);
      if (inner === 'open') return 'open';
      if (inner === 'document') reach = 'document';
    }
  }
  return reach;
}

/**
 * Takes `validator` as the compiled validator of `schema` (one generated ahead from the same schema
 * with the same options: the meta-schemas, see meta-schemas.ts).
 */
export function usePrecompiled(schema: JsonSchema, validator: ValidateFunction): void {
  if (typeof schema !== 'boolean') cache.set(schema, validator);
}

/** Compile (once) and return the validator for `schema`. Throws ajv's error if the schema cannot compile. */
export function compileSchema(schema: JsonSchema): ValidateFunction {
  if (typeof schema === 'boolean') {
    let v = booleanValidators.get(schema);
    if (!v) {
      v = ajv.compile(schema);
      booleanValidators.set(schema, v);
    }
    return v;
  }
  let v = cache.get(schema);
  if (!v) {
    // Schemas that reuse an $id (copies of one tool) would clash in ajv's registry; compile
    // those without the id, since we address them by object, never by URI.
    const id = typeof schema['$id'] === 'string' ? schema['$id'] : undefined;
    v = id !== undefined && ajv.getSchema(id) ? ajv.compile(withoutId(schema)) : ajv.compile(schema);
    if (reachOf(schema) !== 'open') ownContext.add(v);
    cache.set(schema, v);
  }
  return v;
}

function withoutId(schema: { readonly [k: string]: unknown }): Record<string, unknown> {
  const { $id: _id, ...rest } = schema;
  return rest;
}

const DRAFT07 = /^https?:\/\/json-schema\.org\/draft-07\/schema#?$/;
const DRAFT2020 = /^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/;

/**
 * Check that `schema` is itself a valid JSON Schema (against the meta-schema its `$schema`
 * names; 2020-12 when absent) and that ajv can compile it. Returns issues with pointers into the schema.
 */
export function checkSchema(schema: unknown, file?: string, basePointer = ''): Issue[] {
  if (typeof schema === 'boolean') return [];
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) {
    return [{ pointer: basePointer, message: 'a JSON Schema must be an object or a boolean', ...(file ? { file } : {}) }];
  }
  const declared = (schema as Record<string, unknown>)['$schema'];
  if (declared !== undefined && (typeof declared !== 'string' || !(DRAFT07.test(declared) || DRAFT2020.test(declared)))) {
    return [{ pointer: `${basePointer}/$schema`, message: `unsupported $schema ${JSON.stringify(declared)}: use draft-07 or 2020-12`, ...(file ? { file } : {}) }];
  }
  // Its dialect's meta-schema, compiled ahead (ajv compiled 2020-12's on every process's first check).
  const meta = (declared !== undefined && DRAFT07.test(declared) ? draft07 : draft2020) as unknown as ValidateFunction;
  if (!meta(schema)) {
    return toIssues(meta.errors ?? [], file).map((i) => ({ ...i, pointer: basePointer + i.pointer, message: `not a valid JSON Schema: ${i.message}` }));
  }
  try {
    compileSchema(schema as JsonSchema);
  } catch (err) {
    return [{ pointer: basePointer, message: `cannot compile: ${(err as Error).message}`, ...(file ? { file } : {}) }];
  }
  return [];
}

/** What a valid value has: one empty list for all of them (a new one per call was garbage at every step). */
export const NO_ISSUES: readonly Issue[] = Object.freeze([]);

/** Validate and return issues (empty when valid). */
export function validate(schema: JsonSchema, value: unknown, file?: string): readonly Issue[] {
  return validateWith(compileSchema(schema), value, file, schema);
}

/** Validate with a compiled validator; `root` lets unknown-key errors suggest the declared names. */
export function validateWith(v: ValidateFunction, value: unknown, file?: string, root?: JsonSchema): readonly Issue[] {
  return isValid(v, value) ? NO_ISSUES : toIssues(v.errors ?? [], file, root);
}

const rootIds = new WeakMap<object, string>();
let registered = 0;
const subschemas = new Map<string, ValidateFunction>();

/**
 * The validator of the subschema at `pointer` (a JSON pointer into `root`), compiled once. A
 * subschema that refers to nothing outside itself is compiled on its own; one that does is
 * compiled through the root, registered under an id of ours, so its `$ref`s resolve against it.
 * Why not always the latter: the first use of the root's id compiles the whole root once more
 * (10 ms for the benchmark's three-field state; a first step of a process paid it on its commit).
 */
export function compileSubschema(root: JsonSchema, pointer: string): ValidateFunction {
  if (pointer === '' || typeof root === 'boolean') return compileSchema(root);
  const node = schemaAtPointer(root, pointer);
  if (node !== undefined && reachOf(node) === 'alone') return compileSchema(node);
  let id = rootIds.get(root);
  if (id === undefined) {
    id = `agentic-rl-toolkit:root:${++registered}`;
    ajv.addSchema({ ...root, $id: id });
    rootIds.set(root, id);
  }
  const key = `${id}#${pointer.split('/').map(encodeURIComponent).join('/')}`;
  let v = subschemas.get(key);
  if (!v) {
    v = ajv.getSchema(key);
    if (!v) throw new Error(`no subschema at ${pointer}`);
    if (reachOf(root) !== 'open') ownContext.add(v);
    subschemas.set(key, v);
  }
  return v;
}

/** The schema at a JSON pointer into `root` (undefined when the pointer leads nowhere, or to what is not a schema). */
export function schemaAtPointer(root: JsonSchema, pointer: string): JsonSchema | undefined {
  let node: unknown = root;
  for (const token of parsePointer(pointer)) {
    if (Array.isArray(node)) node = node[Number(token)];
    else if (typeof node === 'object' && node !== null && Object.hasOwn(node, token)) node = (node as Record<string, unknown>)[token];
    else return undefined;
  }
  return typeof node === 'boolean' || (typeof node === 'object' && node !== null && !Array.isArray(node)) ? (node as JsonSchema) : undefined;
}

/** Turn ajv errors into issues whose pointer names the exact offending field, missing ones included. */
export function toIssues(errors: readonly ErrorObject[], file?: string, root?: JsonSchema): Issue[] {
  const issues: Issue[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    let pointer = e.instancePath;
    let message = e.message ?? 'is invalid';
    const p = e.params as Record<string, unknown>;
    switch (e.keyword) {
      case 'required':
        pointer += `/${escapePointerToken(String(p['missingProperty']))}`;
        message = 'is required but missing';
        break;
      case 'additionalProperties':
      case 'unevaluatedProperties': {
        const key = String(p[e.keyword === 'additionalProperties' ? 'additionalProperty' : 'unevaluatedProperty']);
        pointer += `/${escapePointerToken(key)}`;
        const guess = didYouMean(key, [...declaredKeys(e.parentSchema, root)]);
        message = `is not allowed here (the schema does not declare it and is closed)${guess ? `: did you mean '${guess}'?` : ''}`;
        break;
      }
      case 'enum':
        message = `must be one of ${JSON.stringify(p['allowedValues'])}`;
        break;
      case 'const':
        message = `must be ${JSON.stringify(p['allowedValue'])}`;
        break;
      case 'type':
        message = `must be ${String(p['type'])}`;
        break;
      default:
        break;
    }
    const key = `${pointer}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push({ pointer, message, schemaPath: e.schemaPath, ...(file ? { file } : {}) });
  }
  return issues;
}

/** Property names a schema declares, through local `$ref`s and `allOf` branches. */
function declaredKeys(schema: unknown, root: JsonSchema | undefined, out = new Set<string>(), depth = 0): Set<string> {
  if (typeof schema !== 'object' || schema === null || depth > 8) return out;
  const s = schema as Record<string, unknown>;
  if (typeof s['properties'] === 'object' && s['properties'] !== null) for (const k of Object.keys(s['properties'])) out.add(k);
  if (Array.isArray(s['allOf'])) for (const b of s['allOf']) declaredKeys(b, root, out, depth + 1);
  const ref = s['$ref'];
  if (typeof ref === 'string' && ref.startsWith('#/') && typeof root === 'object') {
    let target: unknown = root;
    for (const part of ref.slice(2).split('/')) target = typeof target === 'object' && target !== null ? (target as Record<string, unknown>)[part] : undefined;
    declaredKeys(target, root, out, depth + 1);
  }
  return out;
}

/** The known name closest to a mistyped one (`param` → `params`, `enable_if` → `enabled_if`), if any is close. */
export function didYouMean(word: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = k.startsWith(word) || word.startsWith(k) ? Math.abs(k.length - word.length) * 0.5 : editDistance(word, k);
    if (d < bestDistance) {
      bestDistance = d;
      best = k;
    }
  }
  return bestDistance <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length] as number;
}
