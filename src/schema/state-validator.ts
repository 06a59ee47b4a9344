/**
 * Validates a state after a patch in time proportional to the patch, not to the state.
 *
 * Changing the value at a path can only change the outcome of schema applications whose instance
 * location is that path, one of its descendants, or one of its ancestors. Descendants are covered
 * by validating the changed subtree against the subschema at that path. Ancestors matter only
 * through their keywords that look at more than one child: along the path we accept "plain"
 * containers, whose children are judged independently (`properties`, `additionalProperties`,
 * `items`, `type`, annotations), and check the few container keywords an add or remove can break
 * (`required`, `minProperties`/`maxProperties`, `propertyNames`, `minItems`/`maxItems`). At the
 * first ancestor with a cross-field keyword (`allOf`/`anyOf`/`oneOf`/`not`, `if`, `dependent*`,
 * `unevaluated*`, `patternProperties`, `uniqueItems`, `contains`, `prefixItems`, …) the whole
 * subtree of that ancestor is validated instead: a fallback that is always correct, and in
 * practice rare (state schemas are records and maps).
 *
 * Subschemas are addressed by JSON pointer into the root schema and compiled by ajv once each, so
 * `$ref`s inside them resolve against the root as usual.
 */
import type { Issue } from '../shared/errors.js';
import { escapePointerToken, isJsonCopy, isPlainObject, parsePointer, type JsonValue } from '../shared/json.js';
import type { Patch } from '../state/patch.js';
import type { ValidateFunction } from 'ajv';
import { compileSubschema, isValid, NO_ISSUES, schemaAtPointer, validate, validateWith, type JsonSchema } from './ajv.js';

/** Keywords of a container that relate several children: a change below them needs the whole container. */
const CROSS_FIELD = [
  'allOf',
  'anyOf',
  'oneOf',
  'not',
  'if',
  'then',
  'else',
  'dependentRequired',
  'dependentSchemas',
  'dependencies',
  'unevaluatedProperties',
  'unevaluatedItems',
  'patternProperties',
  'uniqueItems',
  'contains',
  'prefixItems',
  'const',
  'enum',
  '$dynamicRef',
  '$recursiveRef',
  '$id',
];

interface Plan {
  /** Instance path of the subtree to validate. */
  readonly at: readonly string[];
  /** JSON pointer (into the root schema) of the schema that subtree must satisfy. */
  readonly schema: string;
}

interface Check {
  readonly at: readonly string[];
  /** `at` as a JSON pointer, prefixed to the subtree's issues. */
  readonly prefix: string;
  readonly validator: ValidateFunction;
}

const MAX_CACHED_PLANS = 4_096;

type Step =
  | { readonly kind: 'schema'; readonly pointer: string; readonly node: Record<string, unknown> }
  | { readonly kind: 'any' }
  | { readonly kind: 'none' };

export class StateValidator {
  readonly #root: JsonSchema;
  /** States known valid (deeply frozen ones only; see validate). */
  readonly #valid = new WeakSet<object>();
  /** False when the schema cannot be addressed by pointer (nested `$id`s): always validate in full. */
  readonly #incremental: boolean;
  /** Plans by the operation's path, then its kind (and `from`, for move and copy). */
  readonly #plans = new Map<string, Map<string, readonly Check[] | 'full'>>();
  /** Plans of appends (`/-`) by path, `-` standing for the new element's index. */
  readonly #appends = new Map<string, readonly Check[] | 'full'>();
  /** validateChange's checks of a patch of several operations (only the first of them are this patch's). */
  readonly #gathered: Check[] = [];

  constructor(root: JsonSchema) {
    this.#root = root;
    this.#incremental = isPlainObject(root) && !hasNestedId(root, true);
  }

  /** Validate a whole state. */
  validate(state: JsonValue): readonly Issue[] {
    // A deeply frozen state that passed once passes again: an initial state is validated once, not at every reset.
    if (this.#valid.has(state as object)) return NO_ISSUES;
    const issues = validate(this.#root, state);
    if (issues.length === 0 && isJsonCopy(state)) this.#valid.add(state as object);
    return issues;
  }

  /** Validate `next`, the state after `patch` was applied to a state that was valid. */
  validateChange(next: JsonValue, patch: Patch): readonly Issue[] {
    if (!this.#incremental) return this.validate(next);
    // One operation (most steps): its plan as it is, no list to gather or deduplicate.
    if (patch.length === 1) {
      const op = patch[0] as Patch[number];
      if (op.op === 'test') return NO_ISSUES;
      const plan = this.#planFor(op, patch, next);
      return plan === 'full' ? this.validate(next) : this.#check(plan, next);
    }
    // Gathered in one list kept for every commit (its first `push` would allocate room for 17).
    // Indexed loops: a for…of allocates an iterator until the optimiser removes it, and this runs per commit from the first.
    const checks = this.#gathered;
    let count = 0;
    for (let k = 0; k < patch.length; k++) {
      const op = patch[k] as Patch[number];
      if (op.op === 'test') continue;
      const plan = this.#planFor(op, patch, next);
      if (plan === 'full') return this.validate(next);
      for (let j = 0; j < plan.length; j++) {
        const c = plan[j] as Check;
        // The same subtree twice (two operations in one record) is checked once.
        if (!hasCheck(checks, count, c)) checks[count++] = c;
      }
    }
    return this.#check(checks, next, count);
  }

  /** The first `count` of `checks` (all of them by default) on `next`. */
  #check(checks: readonly Check[], next: JsonValue, count = checks.length): readonly Issue[] {
    let issues: Issue[] | undefined;
    for (let k = 0; k < count; k++) {
      const c = checks[k] as Check;
      const value = valueAt(next, c.at);
      if (value === undefined || isValid(c.validator, value)) continue;
      issues ??= [];
      for (const issue of validateWith(c.validator, value, undefined, this.#root)) issues.push(c.prefix === '' ? issue : { ...issue, pointer: c.prefix + issue.pointer });
    }
    return issues ?? NO_ISSUES;
  }

  /**
   * The checks one operation needs, cached by its path and kind: a tool touches the same few
   * paths over and over (keyed without building a string per call).
   */
  #planFor(op: Exclude<Patch[number], { op: 'test' }>, patch: Patch, next: JsonValue): readonly Check[] | 'full' {
    if (op.path.endsWith('/-')) return this.#appendPlan(op, patch, next);
    const byKind = this.#plans.get(op.path);
    const kind = op.op === 'move' || op.op === 'copy' ? `${op.op}\u0000${op.from}` : op.op;
    const cached = byKind?.get(kind);
    if (cached) return cached;
    const planned = [...(op.op === 'move' ? this.#plan(parsePointer(op.from), 'remove') : []), ...this.#plan(parsePointer(op.path), op.op === 'replace' ? 'replace' : op.op === 'remove' ? 'remove' : 'add')];
    const compiled = this.#compile(planned);
    if (this.#plans.size >= MAX_CACHED_PLANS) this.#plans.clear();
    const kinds = byKind ?? new Map<string, readonly Check[] | 'full'>();
    kinds.set(kind, compiled);
    this.#plans.set(op.path, kinds);
    return compiled;
  }

  /**
   * An append (`/-`) adds the array's last element, unless another operation of the patch also
   * touches that array (a second append, an edit of an element): then the whole array is checked.
   * The plan is cached with `-` standing for the index, which is filled in per call.
   */
  #appendPlan(op: Exclude<Patch[number], { op: 'test' }>, patch: Patch, next: JsonValue): readonly Check[] | 'full' {
    const arrayPointer = op.path.slice(0, -2);
    const array = parsePointer(arrayPointer);
    const parent = valueAt(next, array);
    const below = `${arrayPointer}/`;
    const shared = patch.length > 1 && patch.some((o) => o !== op && (o.path.startsWith(below) || o.path === arrayPointer || ('from' in o && o.from.startsWith(below))));
    if (shared || !Array.isArray(parent)) return this.#compile(this.#plan(array, 'replace'));
    let plan = this.#appends.get(op.path);
    if (!plan) {
      plan = this.#compile(this.#plan([...array, '-'], 'add'));
      if (this.#appends.size >= MAX_CACHED_PLANS) this.#appends.clear();
      this.#appends.set(op.path, plan);
    }
    if (plan === 'full') return plan;
    const index = String(parent.length - 1);
    const depth = array.length;
    return plan.map((c) => {
      if (c.at[depth] !== '-') return c;
      const at = c.at.map((t, i) => (i === depth ? index : t));
      return { ...c, at, prefix: at.map((t) => `/${escapePointerToken(t)}`).join('') };
    });
  }

  #compile(planned: readonly Plan[]): readonly Check[] | 'full' {
    if (planned.some((p) => p.at.length === 0)) return 'full';
    return planned.map((p) => ({ at: p.at, prefix: p.at.map((t) => `/${escapePointerToken(t)}`).join(''), validator: compileSubschema(this.#root, p.schema) }));
  }

  /** What to validate after one operation at `path`. */
  #plan(path: readonly string[], kind: 'add' | 'remove' | 'replace'): Plan[] {
    if (path.length === 0) return [{ at: [], schema: '' }];
    let node: Step = this.#resolve('');
    let deepestPlain: Plan = { at: [], schema: '' };
    for (let depth = 0; depth < path.length; depth++) {
      if (node.kind === 'any') return [];
      if (node.kind === 'none') return [deepestPlain];
      const container = node;
      const at = path.slice(0, depth);
      if (CROSS_FIELD.some((k) => k in container.node)) return [{ at, schema: container.pointer }];
      deepestPlain = { at, schema: container.pointer };
      const token = path[depth] as string;
      const last = depth === path.length - 1;
      if (last && kind !== 'replace') {
        // The container's own count and key rules, checked on the container without its children.
        if (breaksContainer(container.node, token, kind)) return [deepestPlain];
      }
      node = this.#child(container, token);
    }
    if (kind === 'remove') return [];
    if (node.kind === 'any') return [];
    if (node.kind === 'none') return [deepestPlain];
    return [{ at: path, schema: node.pointer }];
  }

  /** The schema a child at `token` must satisfy. */
  #child(container: Extract<Step, { kind: 'schema' }>, token: string): Step {
    const n = container.node;
    const props = n['properties'];
    if (isPlainObject(props) && Object.hasOwn(props, token)) return this.#resolve(`${container.pointer}/properties/${escapePointerToken(token)}`);
    if ('items' in n && /^(0|[1-9]\d*|-)$/.test(token)) return this.#resolve(`${container.pointer}/items`);
    if ('additionalProperties' in n && !/^(0|[1-9]\d*)$/.test(token)) return this.#resolve(`${container.pointer}/additionalProperties`);
    // Nothing declares the child: it is allowed (a type-only or open container). Arrays without `items` too.
    return isPlainObject(props) || 'additionalProperties' in n || 'items' in n || 'type' in n ? { kind: 'any' } : { kind: 'none' };
  }

  /** The schema at a pointer, through `$ref`s that stand alone (a `$ref` with siblings is cross-field). */
  #resolve(pointer: string, hops = 0): Step {
    const node = schemaAtPointer(this.#root, pointer);
    if (node === true || (isPlainObject(node) && Object.keys(node).every((k) => ANNOTATIONS.has(k)))) return { kind: 'any' };
    if (!isPlainObject(node)) return { kind: 'none' };
    const ref = node['$ref'];
    if (typeof ref === 'string') {
      const alone = Object.keys(node).every((k) => k === '$ref' || ANNOTATIONS.has(k));
      if (!alone || !ref.startsWith('#') || hops > 32) return { kind: 'none' };
      return this.#resolve(ref.slice(1), hops + 1);
    }
    return { kind: 'schema', pointer, node };
  }
}

const ANNOTATIONS = new Set(['title', 'description', 'default', 'examples', '$comment', 'deprecated', 'readOnly', 'writeOnly', '$schema', '$defs', 'definitions']);

/** Could adding or removing `key` break a keyword of the container itself? Judged from the schema alone, so plans can be cached. */
function breaksContainer(node: Record<string, unknown>, key: string, kind: 'add' | 'remove'): boolean {
  if ('minItems' in node || 'maxItems' in node || 'minProperties' in node || 'maxProperties' in node) return true;
  if (kind === 'remove') return Array.isArray(node['required']) && node['required'].includes(key);
  // A new key must be one the container admits.
  if ('propertyNames' in node) return true;
  const props = node['properties'];
  return node['additionalProperties'] === false && !(isPlainObject(props) && Object.hasOwn(props, key));
}

/** A loop, not `some` with a closure: a closure per operation per commit is garbage before the optimiser runs. */
function hasCheck(checks: readonly Check[], count: number, c: Check): boolean {
  for (let k = 0; k < count; k++) {
    const d = checks[k] as Check;
    if (d.prefix === c.prefix && d.validator === c.validator) return true;
  }
  return false;
}

function valueAt(doc: JsonValue, path: readonly string[]): JsonValue | undefined {
  let node: JsonValue | undefined = doc;
  // Indexed: runs per commit from a process's first step, before the optimiser removes a for…of's iterator.
  for (let k = 0; k < path.length; k++) {
    const t = path[k] as string;
    if (Array.isArray(node)) node = node[Number(t)];
    else if (isPlainObject(node)) node = Object.hasOwn(node, t) ? node[t] : undefined;
    else return undefined;
  }
  return node;
}

function hasNestedId(node: unknown, isRoot = false): boolean {
  if (Array.isArray(node)) return node.some((n) => hasNestedId(n));
  if (!isPlainObject(node)) return false;
  if (!isRoot && typeof node['$id'] === 'string') return true;
  return Object.values(node).some((v) => hasNestedId(v));
}
