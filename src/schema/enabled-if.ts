/**
 * `enabled_if`: a small, safe expression language over the state, compiled once per action
 * into a closure tree. No `eval`, no `new Function`, no access to anything but the state.
 *
 *   expr     := or
 *   or       := and (("or" | "||") and)*
 *   and      := unary (("and" | "&&") unary)*
 *   unary    := ("not" | "!") unary | compare
 *   compare  := operand (("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") operand)?
 *   operand  := literal | path | "(" expr ")" | "[" [literal ("," literal)*] "]"
 *   path     := name ("." name | "[" integer "]")*        e.g. user.passport, items[0].id, items.length
 *   literal  := number | 'string' | "string" | true | false | null
 *
 * Semantics: a missing path reads as `null`. `==`/`!=` compare JSON values structurally.
 * `<`, `<=`, `>`, `>=` are true only when both sides are numbers or both are strings.
 * `x in y` is membership in an array, a substring test on strings, a key test on objects.
 * `.length` of an array or string is its length. Truthiness (a bare path, `not`, `and`, `or`):
 * null, false, 0, "" and [] are false; everything else is true.
 */
import { deepEqual } from '../state/patch.js';
import { isPlainObject } from '../shared/json.js';
import type { JsonSchema } from './ajv.js';

/** An `enabled_if` expression compiled: its source, the state paths it reads, and `evaluate` on a state. */
export interface CompiledCondition {
  readonly source: string;
  /** Every state path the expression reads, as token lists (for load-time checks and schema-diff). */
  readonly paths: readonly (readonly string[])[];
  /** Every comparison of a path with a literal, so that a load-time check can refuse one that can never hold. */
  readonly comparisons: readonly Comparison[];
  evaluate(state: unknown): boolean;
}

export interface Comparison {
  readonly path: readonly string[];
  readonly op: string;
  readonly literal: unknown;
}

/** Limits: a condition is one line a person wrote, and deeper nesting would exhaust the stack. */
export const MAX_CONDITION_LENGTH = 4_096;
export const MAX_CONDITION_NESTING = 32;

/** An `enabled_if` expression that does not parse, with the position of the problem. */
export class ConditionSyntaxError extends Error {
  readonly column: number;

  constructor(message: string, column: number) {
    super(`${message} at column ${column + 1}`);
    this.name = 'ConditionSyntaxError';
    this.column = column;
  }
}

type Token =
  | { kind: 'num'; value: number; at: number }
  | { kind: 'str'; value: string; at: number }
  | { kind: 'name'; value: string; at: number }
  | { kind: 'op'; value: string; at: number }
  | { kind: 'end'; at: number };

const OPERATORS = ['==', '!=', '<=', '>=', '&&', '||', '<', '>', '!', '(', ')', '[', ']', '.', ','];

function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i] as string;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === '"' || c === "'") {
      let j = i + 1;
      let value = '';
      while (j < src.length && src[j] !== c) {
        if (src[j] === '\\' && j + 1 < src.length) j++;
        value += src[j];
        j++;
      }
      if (j >= src.length) throw new ConditionSyntaxError('unterminated string', i);
      tokens.push({ kind: 'str', value, at: i });
      i = j + 1;
      continue;
    }
    const num = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(src.slice(i));
    if (num && (c !== '-' || tokens.length === 0 || tokens[tokens.length - 1]?.kind === 'op')) {
      tokens.push({ kind: 'num', value: Number(num[0]), at: i });
      i += num[0].length;
      continue;
    }
    const name = /^[\p{L}_$][\p{L}\p{N}_$-]*/u.exec(src.slice(i));
    if (name) {
      tokens.push({ kind: 'name', value: name[0], at: i });
      i += name[0].length;
      continue;
    }
    const op = OPERATORS.find((o) => src.startsWith(o, i));
    if (!op) throw new ConditionSyntaxError(c === '=' ? "single '=' is not an operator: use '==' to compare" : `unexpected character '${c}'`, i);
    tokens.push({ kind: 'op', value: op, at: i });
    i += op.length;
  }
  tokens.push({ kind: 'end', at: src.length });
  return tokens;
}

type Node = (state: unknown) => unknown;

const KEYWORDS = new Set(['and', 'or', 'not', 'in', 'true', 'false', 'null']);

class Parser {
  readonly #tokens: Token[];
  #pos = 0;
  #depth = 0;
  readonly paths: string[][] = [];
  readonly comparisons: Comparison[] = [];
  /** What the last operand was: a path, a literal, or something else. */
  #last: { path: string[] } | { literal: unknown } | undefined;

  constructor(src: string) {
    if (src.length > MAX_CONDITION_LENGTH) throw new ConditionSyntaxError(`is ${src.length} characters long; the limit is ${MAX_CONDITION_LENGTH}`, MAX_CONDITION_LENGTH);
    this.#tokens = tokenize(src);
  }

  #enter(at: number): void {
    if (++this.#depth > MAX_CONDITION_NESTING) throw new ConditionSyntaxError(`nests deeper than ${MAX_CONDITION_NESTING} levels`, at);
  }

  parse(): Node {
    const node = this.#or();
    const t = this.#peek();
    if (t.kind !== 'end') throw new ConditionSyntaxError(`unexpected '${'value' in t ? String(t.value) : ''}'`, t.at);
    return node;
  }

  #peek(): Token {
    return this.#tokens[this.#pos] as Token;
  }

  #next(): Token {
    return this.#tokens[this.#pos++] as Token;
  }

  #isOp(value: string): boolean {
    const t = this.#peek();
    return (t.kind === 'op' || t.kind === 'name') && t.value === value;
  }

  #expect(value: string): void {
    const t = this.#next();
    if (!((t.kind === 'op' || t.kind === 'name') && t.value === value)) throw new ConditionSyntaxError(`expected '${value}'`, t.at);
  }

  // Chains of `or`/`and` are flat lists, evaluated in a loop: a long chain costs no stack.
  #or(): Node {
    const terms = [this.#and()];
    while (this.#isOp('or') || this.#isOp('||')) {
      this.#next();
      terms.push(this.#and());
    }
    return terms.length === 1 ? (terms[0] as Node) : (s) => terms.some((t) => truthy(t(s)));
  }

  #and(): Node {
    const terms = [this.#unary()];
    while (this.#isOp('and') || this.#isOp('&&')) {
      this.#next();
      terms.push(this.#unary());
    }
    return terms.length === 1 ? (terms[0] as Node) : (s) => terms.every((t) => truthy(t(s)));
  }

  #unary(): Node {
    if (this.#isOp('not') || this.#isOp('!')) {
      this.#enter(this.#next().at);
      const inner = this.#unary();
      this.#depth--;
      return (s) => !truthy(inner(s));
    }
    return this.#compare();
  }

  #compare(): Node {
    const left = this.#operand();
    const leftKind = this.#last;
    const t = this.#peek();
    let op: string | undefined;
    if (t.kind === 'op' && ['==', '!=', '<', '<=', '>', '>='].includes(t.value)) op = t.value;
    else if (t.kind === 'name' && t.value === 'in') op = 'in';
    else if (t.kind === 'name' && t.value === 'not' && this.#tokens[this.#pos + 1]?.kind === 'name' && (this.#tokens[this.#pos + 1] as { value: string }).value === 'in') {
      this.#next();
      op = 'not in';
    }
    if (!op) return left;
    this.#next();
    const right = this.#operand();
    const rightKind = this.#last;
    if (leftKind && rightKind && op !== 'in' && op !== 'not in') {
      if ('path' in leftKind && 'literal' in rightKind) this.comparisons.push({ path: leftKind.path, op, literal: rightKind.literal });
      else if ('literal' in leftKind && 'path' in rightKind) this.comparisons.push({ path: rightKind.path, op, literal: leftKind.literal });
    }
    switch (op) {
      case '==':
        return (s) => deepEqual(left(s), right(s));
      case '!=':
        return (s) => !deepEqual(left(s), right(s));
      case 'in':
        return (s) => contains(right(s), left(s));
      case 'not in':
        return (s) => !contains(right(s), left(s));
      default:
        return (s) => order(op, left(s), right(s));
    }
  }

  #operand(): Node {
    const t = this.#next();
    this.#last = undefined;
    switch (t.kind) {
      case 'num':
      case 'str': {
        const v = t.value;
        this.#last = { literal: v };
        return () => v;
      }
      case 'op':
        if (t.value === '(') {
          this.#enter(t.at);
          const inner = this.#or();
          this.#expect(')');
          this.#depth--;
          this.#last = undefined;
          return inner;
        }
        if (t.value === '[') return this.#list();
        throw new ConditionSyntaxError(`unexpected '${t.value}'`, t.at);
      case 'name':
        if (t.value === 'true' || t.value === 'false' || t.value === 'null') {
          const v = t.value === 'null' ? null : t.value === 'true';
          this.#last = { literal: v };
          return () => v;
        }
        if (KEYWORDS.has(t.value)) throw new ConditionSyntaxError(`'${t.value}' needs an operand before it`, t.at);
        return this.#path(t.value);
      case 'end':
        throw new ConditionSyntaxError('expression ends too early', t.at);
    }
  }

  #list(): Node {
    const items: unknown[] = [];
    if (!this.#isOp(']')) {
      for (;;) {
        const t = this.#next();
        if (t.kind === 'num' || t.kind === 'str') items.push(t.value);
        else if (t.kind === 'name' && (t.value === 'true' || t.value === 'false' || t.value === 'null')) items.push(t.value === 'null' ? null : t.value === 'true');
        else throw new ConditionSyntaxError('a list may hold only literals', t.at);
        if (this.#isOp(']')) break;
        this.#expect(',');
      }
    }
    this.#expect(']');
    return () => items;
  }

  #path(first: string): Node {
    const tokens: string[] = [first];
    for (;;) {
      if (this.#isOp('.')) {
        this.#next();
        const t = this.#next();
        if (t.kind !== 'name') throw new ConditionSyntaxError("expected a field name after '.'", t.at);
        tokens.push(t.value);
      } else if (this.#isOp('[')) {
        this.#next();
        const t = this.#next();
        if (t.kind === 'num' && Number.isInteger(t.value) && t.value >= 0) tokens.push(String(t.value));
        else if (t.kind === 'str') tokens.push(t.value);
        else throw new ConditionSyntaxError('expected an index or a quoted key inside [ ]', t.at);
        this.#expect(']');
      } else break;
    }
    this.paths.push(tokens);
    this.#last = { path: tokens };
    return (state) => readPath(state, tokens);
  }
}

function readPath(state: unknown, tokens: readonly string[]): unknown {
  let node: unknown = state;
  // Indexed: `enabled_if` is read at every dispatch, from the first (a for…of allocates an iterator until optimised).
  for (let k = 0; k < tokens.length; k++) {
    const t = tokens[k] as string;
    if (Array.isArray(node)) node = t === 'length' ? node.length : node[Number(t)];
    else if (typeof node === 'string' && t === 'length') node = node.length;
    else if (isPlainObject(node)) node = Object.hasOwn(node, t) ? node[t] : undefined;
    else return null;
    if (node === undefined) return null;
  }
  return node;
}

function truthy(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0;
  return v !== null && v !== undefined && v !== false && v !== 0 && v !== '';
}

function order(op: string, a: unknown, b: unknown): boolean {
  if (!((typeof a === 'number' && typeof b === 'number') || (typeof a === 'string' && typeof b === 'string'))) return false;
  switch (op) {
    case '<':
      return a < b;
    case '<=':
      return a <= b;
    case '>':
      return a > b;
    default:
      return a >= b;
  }
}

function contains(container: unknown, item: unknown): boolean {
  if (Array.isArray(container)) return container.some((x) => deepEqual(x, item));
  if (typeof container === 'string') return typeof item === 'string' && container.includes(item);
  if (isPlainObject(container)) return typeof item === 'string' && Object.hasOwn(container, item);
  return false;
}

/** Parse and compile an expression. Throws ConditionSyntaxError with the column of the problem. */
export function compileCondition(source: string): CompiledCondition {
  const parser = new Parser(source);
  const root = parser.parse();
  return { source, paths: parser.paths, comparisons: parser.comparisons, evaluate: (state) => truthy(root(state)) };
}

/**
 * The schemas that describe a path of the state schema: follows properties, map values
 * (`additionalProperties`/`patternProperties` schemas), array items, local `$ref`s and every
 * branch of `allOf`/`anyOf`/`oneOf`; `length` of an array or a string is an integer. Empty when
 * the schema does not declare the path.
 */
export function schemasAtPath(root: JsonSchema, tokens: readonly string[]): unknown[] {
  const resolve = refResolver(root);
  const out: unknown[] = [];
  const walk = (raw: unknown, depth: number): void => {
    const s = resolve(raw);
    if (depth === tokens.length) {
      out.push(s);
      return;
    }
    if (!isPlainObject(s)) return;
    const token = tokens[depth] as string;
    for (const key of ['allOf', 'anyOf', 'oneOf'] as const) {
      const branches = s[key];
      if (Array.isArray(branches)) for (const b of branches) walk(b, depth);
    }
    const types = Array.isArray(s['type']) ? s['type'] : [s['type']];
    if (token === 'length' && (types.includes('array') || types.includes('string'))) {
      if (depth + 1 === tokens.length) out.push({ type: 'integer' });
      return;
    }
    const props = s['properties'];
    if (isPlainObject(props) && Object.hasOwn(props, token)) walk(props[token], depth + 1);
    const patterns = s['patternProperties'];
    if (isPlainObject(patterns)) {
      for (const [re, sub] of Object.entries(patterns)) if (new RegExp(re, 'u').test(token)) walk(sub, depth + 1);
    }
    if (isPlainObject(s['additionalProperties'])) walk(s['additionalProperties'], depth + 1);
    if (/^(0|[1-9]\d*)$/.test(token)) {
      const prefix = s['prefixItems'];
      if (Array.isArray(prefix) && Number(token) < prefix.length) walk(prefix[Number(token)], depth + 1);
      else if (s['items'] !== undefined && typeof s['items'] !== 'boolean') walk(s['items'], depth + 1);
    }
  };
  walk(root, 0);
  return out;
}

/** Does the state schema declare this path? */
export function schemaDeclaresPath(root: JsonSchema, tokens: readonly string[]): boolean {
  return schemasAtPath(root, tokens).length > 0;
}

/**
 * The JSON types a value at `tokens` may have, or undefined when the schema does not say (a
 * branch without `type`, `const` or `enum` allows anything).
 */
export function typesAtPath(root: JsonSchema, tokens: readonly string[]): Set<string> | undefined {
  const resolve = refResolver(root);
  const typesOf = (raw: unknown): Set<string> | undefined => {
    const s = resolve(raw);
    if (!isPlainObject(s)) return undefined;
    if (typeof s['type'] === 'string') return new Set([s['type']]);
    if (Array.isArray(s['type'])) return new Set(s['type'].filter((t): t is string => typeof t === 'string'));
    const values = 'const' in s ? [s['const']] : Array.isArray(s['enum']) ? s['enum'] : undefined;
    if (values) return new Set(values.map(jsonType));
    const branches = Array.isArray(s['anyOf']) ? s['anyOf'] : Array.isArray(s['oneOf']) ? s['oneOf'] : undefined;
    if (!branches) return undefined;
    const union = new Set<string>();
    for (const b of branches) {
      const t = typesOf(b);
      if (!t) return undefined;
      for (const x of t) union.add(x);
    }
    return union;
  };
  const union = new Set<string>();
  for (const s of schemasAtPath(root, tokens)) {
    const t = typesOf(s);
    if (!t) return undefined;
    for (const x of t) union.add(x);
  }
  if (union.has('integer')) union.add('number');
  return union.size > 0 ? union : undefined;
}

/** The JSON type name of a value, as a schema's `type` spells it. */
export function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v === 'object' ? 'object' : typeof v;
}

function refResolver(root: JsonSchema): (s: unknown) => unknown {
  const resolve = (s: unknown, seen = new Set<string>()): unknown => {
    if (isPlainObject(s) && typeof s['$ref'] === 'string' && s['$ref'].startsWith('#') && !seen.has(s['$ref'])) {
      seen.add(s['$ref']);
      let target: unknown = root;
      for (const part of s['$ref'].slice(2).split('/').filter(Boolean)) {
        target = isPlainObject(target) ? target[part.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
      }
      return resolve(target, seen);
    }
    return s;
  };
  return resolve;
}
