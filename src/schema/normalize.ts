/**
 * Puts a schema into the form the differ compares: every local `$ref` replaced by its target
 * (recursive references become cycles in the object graph, so moving a definition between inline
 * and `$defs` is no change at all), nullability spelled one way (`type` includes "null"), and
 * annotations dropped. The input is not modified.
 */
import { isPlainObject } from '../shared/json.js';
import type { JsonSchema } from './ajv.js';

export type Schema = boolean | SchemaObject;
export interface SchemaObject {
  [keyword: string]: unknown;
}

/** Keywords that never change the set of valid values. (`default` does not either, but the differ reports its changes, so it is kept.) */
export const ANNOTATIONS = new Set(['title', 'description', 'examples', '$comment', 'deprecated', 'readOnly', 'writeOnly', '$schema', '$id', '$anchor', 'contentMediaType', 'contentEncoding']);

const MAPS = ['properties', 'patternProperties', 'dependentSchemas'];
const LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SINGLES = ['items', 'additionalProperties', 'contains', 'not', 'if', 'then', 'else', 'propertyNames', 'unevaluatedProperties', 'unevaluatedItems'];

function lookup(root: unknown, ref: string): unknown {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    const token = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    node = isPlainObject(node) ? node[token] : Array.isArray(node) ? node[Number(token)] : undefined;
  }
  return node;
}

export function normalize(root: JsonSchema): Schema {
  const done = new Map<object, Schema>();

  const visit = (node: unknown): Schema => {
    if (typeof node === 'boolean') return node;
    if (!isPlainObject(node)) return true;
    const seen = done.get(node);
    if (seen !== undefined) return seen;
    // Register the output before recursing, so a reference back to this node closes a cycle.
    const out: SchemaObject = {};
    done.set(node, out);

    let source: Record<string, unknown> = node;
    if (typeof node['$ref'] === 'string') {
      const target = lookup(root, node['$ref']);
      const { $ref: _ref, ...siblings } = node;
      const constraining = Object.keys(siblings).filter((k) => !ANNOTATIONS.has(k) && k !== '$defs' && k !== 'definitions');
      if (constraining.length === 0) {
        // Only annotations beside the $ref: the node is its target.
        const resolved = visit(target ?? true);
        done.set(node, resolved);
        return resolved;
      }
      // 2020-12: sibling keywords apply together with the reference.
      source = { ...siblings, allOf: [...(Array.isArray(siblings['allOf']) ? siblings['allOf'] : []), target ?? true] };
    }

    for (const [key, value] of Object.entries(source)) {
      if (ANNOTATIONS.has(key) || key === '$defs' || key === 'definitions' || key === 'nullable') continue;
      if (MAPS.includes(key) && isPlainObject(value)) out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, visit(v)]));
      else if (LISTS.includes(key) && Array.isArray(value)) out[key] = value.map(visit);
      else if (SINGLES.includes(key)) out[key] = Array.isArray(value) ? value.map(visit) : visit(value);
      else out[key] = value;
    }
    // OpenAPI's `nullable: true` is `type` plus "null".
    if (source['nullable'] === true && out['type'] !== undefined) out['type'] = withNull(out['type']);
    // `anyOf`/`oneOf` of X and {type: "null"} is X plus null, when X names its types.
    for (const key of ['anyOf', 'oneOf'] as const) {
      const branches = out[key];
      if (!Array.isArray(branches) || branches.length !== 2 || Object.keys(out).length !== 1) continue;
      const nullIndex = branches.findIndex((b) => isPlainObject(b) && Object.keys(b).length === 1 && b['type'] === 'null');
      const other = branches[1 - nullIndex];
      if (nullIndex >= 0 && isPlainObject(other) && other['type'] !== undefined) {
        const merged: SchemaObject = { ...other, type: withNull(other['type']) };
        if (Array.isArray(merged['enum'])) merged['enum'] = [...merged['enum'], null];
        done.set(node, merged);
        return merged;
      }
    }
    if (typeof out['type'] === 'string') out['type'] = [out['type']];
    return out;
  };

  return visit(root);
}

function withNull(type: unknown): string[] {
  const list = Array.isArray(type) ? (type as string[]) : [type as string];
  return list.includes('null') ? list : [...list, 'null'];
}
