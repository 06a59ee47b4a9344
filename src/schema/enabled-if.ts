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

export interface CompiledCondition {
  readonly source: string;
  /** Every state path the expression reads, as token lists (for load-time checks and schema-diff). */
  readonly paths: readonly (readonly string[])[];
  evaluate(state: unknown): boolean;
}

export class ConditionSyntaxError extends Error {
  readonly column: number;

  constructor(message: string, column: number) {
    super(`${message} at column ${column + 1}`);
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
  readonly paths: string[][] = [];

  constructor(src: string) {
    this.#tokens = tokenize(src);
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

  #or(): Node {
    let left = this.#and();
    while (this.#isOp('or') || this.#isOp('||')) {
      this.#next();
      const l = left;
      const r = this.#and();
      left = (s) => truthy(l(s)) || truthy(r(s));
    }
    return left;
  }

  #and(): Node {
    let left = this.#unary();
    while (this.#isOp('and') || this.#isOp('&&')) {
      this.#next();
      const l = left;
      const r = this.#unary();
      left = (s) => truthy(l(s)) && truthy(r(s));
    }
    return left;
  }

  #unary(): Node {
    if (this.#isOp('not') || this.#isOp('!')) {
      this.#next();
      const inner = this.#unary();
      return (s) => !truthy(inner(s));
    }
    return this.#compare();
  }

  #compare(): Node {
    const left = this.#operand();
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
    switch (t.kind) {
      case 'num':
      case 'str': {
        const v = t.value;
        return () => v;
      }
      case 'op':
        if (t.value === '(') {
          const inner = this.#or();
          this.#expect(')');
          return inner;
        }
        if (t.value === '[') return this.#list();
        throw new ConditionSyntaxError(`unexpected '${t.value}'`, t.at);
      case 'name':
        if (t.value === 'true') return () => true;
        if (t.value === 'false') return () => false;
        if (t.value === 'null') return () => null;
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
    return (state) => readPath(state, tokens);
  }
}

function readPath(state: unknown, tokens: readonly string[]): unknown {
  let node: unknown = state;
  for (const t of tokens) {
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
  return { source, paths: parser.paths, evaluate: (state) => truthy(root(state)) };
}

/**
 * Does the state schema declare this path? Follows properties, map values
 * (`additionalProperties`/`patternProperties` schemas), array items, local `$ref`s and every
 * branch of `allOf`/`anyOf`/`oneOf`. `length` is allowed on arrays and strings.
 */
export function schemaDeclaresPath(root: JsonSchema, tokens: readonly string[]): boolean {
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
  const walk = (raw: unknown, depth: number): boolean => {
    if (depth === tokens.length) return true;
    const s = resolve(raw);
    if (!isPlainObject(s)) return false;
    const token = tokens[depth] as string;
    for (const key of ['allOf', 'anyOf', 'oneOf'] as const) {
      const branches = s[key];
      if (Array.isArray(branches) && branches.some((b) => walk(b, depth))) return true;
    }
    const types = Array.isArray(s['type']) ? s['type'] : [s['type']];
    if (token === 'length' && (types.includes('array') || types.includes('string'))) return depth + 1 === tokens.length;
    const props = s['properties'];
    if (isPlainObject(props) && Object.hasOwn(props, token)) return walk(props[token], depth + 1);
    const patterns = s['patternProperties'];
    if (isPlainObject(patterns)) {
      for (const [re, sub] of Object.entries(patterns)) if (new RegExp(re, 'u').test(token) && walk(sub, depth + 1)) return true;
    }
    if (isPlainObject(s['additionalProperties']) && walk(s['additionalProperties'], depth + 1)) return true;
    if (/^(0|[1-9]\d*)$/.test(token)) {
      const prefix = s['prefixItems'];
      if (Array.isArray(prefix) && Number(token) < prefix.length) return walk(prefix[Number(token)], depth + 1);
      if (s['items'] !== undefined && typeof s['items'] !== 'boolean') return walk(s['items'], depth + 1);
    }
    return false;
  };
  return walk(root, 0);
}
