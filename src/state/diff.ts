/**
 * A JSON Patch that turns `from` into `to`. States share structure (every commit copies only
 * the path it changes), so an identical reference means an identical subtree and is skipped:
 * diffing a 5 MB state against its successor costs the size of the change, not of the state
 * (inside a wide map too: two versions of it know which keys changed).
 */
import { escapePointerToken, isPlainObject, type JsonValue } from '../shared/json.js';
import { deepEqual, type PatchOperation } from './patch.js';
import { keysChangedBetween } from './wide-object.js';

/** The JSON Patch that turns one state into another. */
export function diffStates(from: JsonValue, to: JsonValue): PatchOperation[] {
  const ops: PatchOperation[] = [];
  walk(from, to, '', ops);
  return ops;
}

function walk(a: JsonValue, b: JsonValue, path: string, ops: PatchOperation[]): void {
  if (a === b) return;
  if (isPlainObject(a) && isPlainObject(b)) {
    const ao = a as Record<string, JsonValue>;
    const bo = b as Record<string, JsonValue>;
    // Two versions of one wide map (wide-object.ts): only the keys changed since their base can differ.
    const changed = keysChangedBetween(ao, bo);
    if (changed !== undefined) {
      for (const k of changed) {
        const p = `${path}/${escapePointerToken(k)}`;
        if (!Object.hasOwn(bo, k)) ops.push({ op: 'remove', path: p });
        else if (!Object.hasOwn(ao, k)) ops.push({ op: 'add', path: p, value: bo[k] as JsonValue });
        else walk(ao[k] as JsonValue, bo[k] as JsonValue, p, ops);
      }
      return;
    }
    for (const k of Object.keys(ao)) if (!Object.hasOwn(bo, k)) ops.push({ op: 'remove', path: `${path}/${escapePointerToken(k)}` });
    for (const k of Object.keys(bo)) {
      const p = `${path}/${escapePointerToken(k)}`;
      if (!Object.hasOwn(ao, k)) ops.push({ op: 'add', path: p, value: bo[k] as JsonValue });
      else walk(ao[k] as JsonValue, bo[k] as JsonValue, p, ops);
    }
    return;
  }
  // Arrays of one length are compared item by item; anything else that differs is replaced whole.
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    for (let i = 0; i < a.length; i++) walk(a[i] as JsonValue, b[i] as JsonValue, `${path}/${i}`, ops);
    return;
  }
  if (!deepEqual(a, b)) ops.push({ op: 'replace', path, value: b });
}
