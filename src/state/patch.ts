/**
 * RFC 6902 JSON Patch, applied immutably with structural sharing: only the containers on the
 * path of each operation are copied, and every new node is frozen. Untouched subtrees are
 * shared with the previous state, so keeping every snapshot costs only what changed, and a
 * tool handler that tries to mutate the state it was given throws instead of corrupting history.
 */
import { AgentError } from '../shared/errors.js';
import { jsonCopy, isPlainObject, parsePointer, type JsonValue } from '../shared/json.js';

export type PatchOperation =
  | { readonly op: 'add' | 'replace' | 'test'; readonly path: string; readonly value: JsonValue }
  | { readonly op: 'remove'; readonly path: string }
  | { readonly op: 'move' | 'copy'; readonly from: string; readonly path: string };

export type Patch = readonly PatchOperation[];

export class PatchError extends AgentError {
  readonly index: number;

  constructor(index: number, message: string) {
    super('TOOL_CONTRACT', `patch operation ${index}: ${message}`, {
      hint: 'A tool patch must be an RFC 6902 JSON Patch whose paths exist in the current state.',
    });
    this.index = index;
  }
}

/** Check that `value` has the shape of a JSON Patch. Throws PatchError naming the bad operation. */
export function assertPatch(value: unknown): asserts value is Patch {
  if (!Array.isArray(value)) throw new PatchError(0, 'a patch must be an array of operations');
  value.forEach((op: unknown, i) => {
    if (!isPlainObject(op)) throw new PatchError(i, 'an operation must be an object');
    const { op: kind, path, from } = op;
    if (typeof path !== 'string') throw new PatchError(i, "'path' must be a string JSON pointer");
    switch (kind) {
      case 'add':
      case 'replace':
      case 'test':
        if (!('value' in op)) throw new PatchError(i, `'${kind}' needs a 'value'`);
        break;
      case 'remove':
        break;
      case 'move':
      case 'copy':
        if (typeof from !== 'string') throw new PatchError(i, `'${kind}' needs a string 'from'`);
        break;
      default:
        throw new PatchError(i, `unknown op '${String(kind)}' (expected add, remove, replace, move, copy or test)`);
    }
  });
}

/** Apply `patch` to `doc` without mutating it. Throws PatchError; on error nothing is changed. */
export function applyPatch<T extends JsonValue>(doc: T, patch: Patch): T {
  return applyOperations(doc, patch, jsonCopy);
}

/**
 * The same, for a patch whose values are frozen JSON already (a tool result checked by the
 * router): they are shared into the new state instead of copied a second time.
 */
export function applyFrozenPatch<T extends JsonValue>(doc: T, patch: Patch): T {
  return applyOperations(doc, patch, (v) => v);
}

function applyOperations<T extends JsonValue>(doc: T, patch: Patch, copy: (value: JsonValue) => JsonValue): T {
  let current: JsonValue = doc;
  patch.forEach((op, i) => {
    current = applyOperation(current, op, i, copy);
  });
  return current as T;
}

function tokensOf(pointer: string, index: number): string[] {
  try {
    return parsePointer(pointer);
  } catch (err) {
    throw new PatchError(index, (err as Error).message);
  }
}

function applyOperation(doc: JsonValue, op: PatchOperation, i: number, copy: (value: JsonValue) => JsonValue): JsonValue {
  const path = tokensOf(op.path, i);
  // Replacing the whole document is legal JSON Patch and the only root-level edit that is.
  if (path.length === 0 && (op.op === 'add' || op.op === 'replace')) return copy(op.value);
  switch (op.op) {
    case 'add':
      return update(doc, path, i, (parent, key) => insert(parent, key, copy(op.value), i, false));
    case 'replace':
      return update(doc, path, i, (parent, key) => insert(parent, key, copy(op.value), i, true));
    case 'remove':
      return update(doc, path, i, (parent, key) => remove(parent, key, i));
    case 'test': {
      const actual = get(doc, path, i);
      if (!deepEqual(actual, op.value)) throw new PatchError(i, `test failed at '${op.path}'`);
      return doc;
    }
    case 'copy':
    case 'move': {
      const from = tokensOf(op.from, i);
      const value = get(doc, from, i);
      if (op.op === 'move') {
        if (op.path.startsWith(op.from + '/')) throw new PatchError(i, `cannot move '${op.from}' into its own child`);
        doc = update(doc, from, i, (parent, key) => remove(parent, key, i));
      }
      return update(doc, path, i, (parent, key) => insert(parent, key, value, i, false));
    }
  }
}

/** Replace the container at `path`'s parent by `edit(parent, lastToken)`, copying the spine. */
function update(doc: JsonValue, path: string[], i: number, edit: (parent: JsonValue, key: string) => JsonValue): JsonValue {
  if (path.length === 0) throw new PatchError(i, 'this operation cannot target the whole document (path "")');
  const walk = (node: JsonValue, depth: number): JsonValue => {
    const key = path[depth] as string;
    if (depth === path.length - 1) return edit(node, key);
    if (Array.isArray(node)) {
      const idx = arrayIndex(node, key, i, false);
      const copy = node.slice();
      copy[idx] = walk(node[idx] as JsonValue, depth + 1);
      return Object.freeze(copy) as JsonValue;
    }
    if (isPlainObject(node) && Object.hasOwn(node, key)) {
      return Object.freeze({ ...node, [key]: walk(node[key] as JsonValue, depth + 1) });
    }
    throw new PatchError(i, `path '/${path.slice(0, depth + 1).join('/')}' does not exist`);
  };
  return walk(doc, 0);
}

function insert(parent: JsonValue, key: string, value: JsonValue, i: number, mustExist: boolean): JsonValue {
  if (Array.isArray(parent)) {
    const copy = parent.slice();
    if (mustExist) copy[arrayIndex(parent, key, i, false)] = value;
    else copy.splice(key === '-' ? parent.length : arrayIndex(parent, key, i, true), 0, value);
    return Object.freeze(copy) as JsonValue;
  }
  if (isPlainObject(parent)) {
    if (mustExist && !Object.hasOwn(parent, key)) throw new PatchError(i, `cannot replace missing key '${key}'`);
    return Object.freeze({ ...parent, [key]: value });
  }
  throw new PatchError(i, `cannot add '${key}' to a ${parent === null ? 'null' : typeof parent}`);
}

function remove(parent: JsonValue, key: string, i: number): JsonValue {
  if (Array.isArray(parent)) {
    const copy = parent.slice();
    copy.splice(arrayIndex(parent, key, i, false), 1);
    return Object.freeze(copy) as JsonValue;
  }
  if (isPlainObject(parent) && Object.hasOwn(parent, key)) {
    const { [key]: _removed, ...rest } = parent;
    return Object.freeze(rest) as JsonValue;
  }
  throw new PatchError(i, `cannot remove missing key '${key}'`);
}

function get(doc: JsonValue, path: string[], i: number): JsonValue {
  let node: JsonValue = doc;
  for (const key of path) {
    if (Array.isArray(node)) node = node[arrayIndex(node, key, i, false)] as JsonValue;
    else if (isPlainObject(node) && Object.hasOwn(node, key)) node = node[key] as JsonValue;
    else throw new PatchError(i, `path '${key}' does not exist`);
  }
  return node;
}

function arrayIndex(arr: readonly unknown[], key: string, i: number, allowEnd: boolean): number {
  if (!/^(0|[1-9][0-9]*)$/.test(key)) throw new PatchError(i, `'${key}' is not an array index`);
  const idx = Number(key);
  if (idx > arr.length || (!allowEnd && idx === arr.length)) throw new PatchError(i, `index ${idx} is out of bounds (length ${arr.length})`);
  return idx;
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, k) => deepEqual(v, b[k]));
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}
