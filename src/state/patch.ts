/**
 * RFC 6902 JSON Patch, applied immutably with structural sharing: only the containers on the
 * path of each operation are copied, and every new node is frozen. Untouched subtrees are
 * shared with the previous state, so keeping every snapshot costs only what changed, and a
 * tool handler that tries to mutate the state it was given throws instead of corrupting history.
 */
import { AgentError } from '../shared/errors.js';
import { jsonCopy, isPlainObject, parsePointer, type JsonValue } from '../shared/json.js';
import { noteChild, noteCopy, wideSet } from './wide-object.js';

/** One JSON Patch operation (RFC 6902), as tools return them. */
export type PatchOperation =
  | { readonly op: 'add' | 'replace' | 'test'; readonly path: string; readonly value: JsonValue }
  | { readonly op: 'remove'; readonly path: string }
  | { readonly op: 'move' | 'copy'; readonly from: string; readonly path: string };

/** A JSON Patch: what a tool changes in the state. */
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

/**
 * Containers this application created and may still edit in place; frozen when it ends. Two
 * operations under one record copy that record (and the spine above it) once, not twice. Past
 * this many, new copies are frozen at once and the rest of the patch copies as it goes.
 */
const MAX_FRESH = 64;

function applyOperations<T extends JsonValue>(doc: T, patch: Patch, copy: (value: JsonValue) => JsonValue): T {
  const fresh: object[] = [];
  let current: JsonValue = doc;
  for (let i = 0; i < patch.length; i++) {
    const op = patch[i] as PatchOperation;
    // A copied or moved value may be one of ours: from here on it has two parents, so nothing
    // made so far may change in place any more.
    if (op.op === 'copy' || op.op === 'move') seal(fresh);
    current = applyOperation(current, op, i, copy, fresh);
  }
  seal(fresh);
  return current as T;
}

function seal(fresh: object[]): void {
  for (let k = 0; k < fresh.length; k++) Object.freeze(fresh[k]);
  fresh.length = 0;
}

function tokensOf(pointer: string, index: number): readonly string[] {
  try {
    return parsePointer(pointer);
  } catch (err) {
    throw new PatchError(index, (err as Error).message);
  }
}

type Edit = 'add' | 'replace' | 'remove';

function applyOperation(doc: JsonValue, op: PatchOperation, i: number, copy: (value: JsonValue) => JsonValue, fresh: object[]): JsonValue {
  const path = tokensOf(op.path, i);
  // Replacing the whole document is legal JSON Patch and the only root-level edit that is.
  if (path.length === 0 && (op.op === 'add' || op.op === 'replace')) return copy(op.value);
  switch (op.op) {
    case 'add':
    case 'replace':
      return update(doc, path, i, op.op, copy(op.value), fresh);
    case 'remove':
      return update(doc, path, i, 'remove', null, fresh);
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
        doc = update(doc, from, i, 'remove', null, fresh);
      }
      return update(doc, path, i, 'add', value, fresh);
    }
  }
}

/** Applies `edit` at `path`, copying the containers on the way down unless this patch made them. */
function update(doc: JsonValue, path: readonly string[], i: number, edit: Edit, value: JsonValue, fresh: object[]): JsonValue {
  const n = path.length;
  if (n === 0) throw new PatchError(i, 'this operation cannot target the whole document (path "")');
  const spine: JsonValue[] = [];
  let node = doc;
  for (let depth = 0; depth < n - 1; depth++) {
    spine.push(node);
    const key = path[depth] as string;
    if (Array.isArray(node)) node = node[arrayIndex(node, key, i, false)] as JsonValue;
    else if (isPlainObject(node) && Object.hasOwn(node, key)) node = node[key] as JsonValue;
    else throw new PatchError(i, `path '/${path.slice(0, depth + 1).join('/')}' does not exist`);
  }
  let child = editContainer(node, path[n - 1] as string, edit, value, i, fresh);
  for (let depth = n - 2; depth >= 0; depth--) {
    child = withChild(spine[depth] as JsonValue, path[depth] as string, child, fresh);
  }
  return child;
}

/** `parent` with `key` set to `child`: in place when this patch made `parent`, else a copy (or, for a wide object, a new version of it). */
function withChild(parent: JsonValue, key: string, child: JsonValue, fresh: object[]): JsonValue {
  const own = fresh.includes(parent as object);
  if (Array.isArray(parent)) {
    const out = own ? parent : copyArray(parent);
    out[Number(key)] = child;
    return noted(own, out, parent, child, fresh);
  }
  return withKey(parent as Record<string, JsonValue>, key, child, own, fresh);
}

/** An object with `key` set (added or replaced). */
function withKey(obj: Record<string, JsonValue>, key: string, value: JsonValue, own: boolean, fresh: object[]): JsonValue {
  if (own) {
    setOwn(obj, key, value);
    return noted(true, obj, obj, value, fresh);
  }
  // A computed key after the spread: measured to keep one hidden class per shape of state (a named key would not).
  // eslint-disable-next-line no-restricted-syntax
  return wideSet(obj, key, value) ?? noted(false, key === '__proto__' ? withOwn({ ...obj }, key, value) : { ...obj, [key]: value }, obj, value, fresh);
}

/** `out`, made from `original` with `child` in it (or `original` itself, edited in place), with what it holds noted. */
function noted<T extends object>(own: boolean, out: T, original: JsonValue, child: JsonValue, fresh: object[]): T {
  if (own) {
    noteChild(out, child);
    return out;
  }
  noteCopy(out, original as object, child);
  return made(out, fresh);
}

function editContainer(parent: JsonValue, key: string, edit: Edit, value: JsonValue, i: number, fresh: object[]): JsonValue {
  const own = fresh.includes(parent as object);
  if (Array.isArray(parent)) {
    const out = own ? parent : copyArray(parent);
    if (edit === 'replace') out[arrayIndex(parent, key, i, false)] = value;
    else if (edit === 'remove') out.splice(arrayIndex(parent, key, i, false), 1);
    else {
      const at = key === '-' ? parent.length : arrayIndex(parent, key, i, true);
      if (at === out.length) out.push(value);
      else out.splice(at, 0, value);
    }
    return noted(own, out, parent, value, fresh);
  }
  if (!isPlainObject(parent)) throw new PatchError(i, `cannot ${edit === 'remove' ? 'remove' : 'add'} '${key}' ${edit === 'remove' ? 'from' : 'to'} a ${parent === null ? 'null' : typeof parent}`);
  const obj = parent as Record<string, JsonValue>;
  if (edit === 'remove') {
    if (!Object.hasOwn(obj, key)) throw new PatchError(i, `cannot remove missing key '${key}'`);
    // A copy, even of our own: `delete` would turn the object into a slow dictionary.
    const { [key]: _removed, ...rest } = obj;
    return noted(false, rest, obj, null, fresh);
  }
  if (edit === 'replace' && !Object.hasOwn(obj, key)) throw new PatchError(i, `cannot replace missing key '${key}'`);
  return withKey(obj, key, value, own, fresh);
}

/** A container this patch made: editable in place until the patch ends (or frozen now, past MAX_FRESH). */
function made<T extends object>(node: T, fresh: object[]): T {
  if (fresh.length < MAX_FRESH) fresh.push(node);
  else Object.freeze(node);
  return node;
}

/** A copy of a (frozen) array: spread, since `slice()` of a frozen array takes V8's slow path (~40× slower at 100 elements). */
function copyArray(arr: readonly JsonValue[]): JsonValue[] {
  return [...arr];
}

/** Keys are data: "__proto__" is set as an own property, never as the prototype. */
function setOwn(obj: Record<string, JsonValue>, key: string, value: JsonValue): void {
  if (key === '__proto__') Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  else obj[key] = value;
}

function withOwn(obj: Record<string, JsonValue>, key: string, value: JsonValue): Record<string, JsonValue> {
  setOwn(obj, key, value);
  return obj;
}

function get(doc: JsonValue, path: readonly string[], i: number): JsonValue {
  let node: JsonValue = doc;
  for (let k = 0; k < path.length; k++) {
    const key = path[k] as string;
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
