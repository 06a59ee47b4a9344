/**
 * Finds schemas that admit no value at all, so a loader can say "action X can never be called
 * because /properties/unit has enum values of the wrong type" instead of letting a policy or a
 * fuzzer spin on it. Conservative: it reports only what it can prove (a `false` schema, empty
 * `type` or `enum`, no enum value passing the rest of its schema, contradictory bounds, a
 * required property that is unsatisfiable or forbidden, and combinators of those).
 */
import { compileSchema, type JsonSchema } from './ajv.js';
import { escapePointerToken, isPlainObject } from '../shared/json.js';

/** A schema no value can satisfy, and the pointer to the part that makes it so. */
export interface Unsatisfiable {
  readonly pointer: string;
  readonly reason: string;
}

/** Finds a part of a schema no value can satisfy (an action that could never be called), or undefined. */
export function findUnsatisfiable(schema: JsonSchema, pointer = ''): Unsatisfiable | undefined {
  if (schema === false) return { pointer, reason: 'the schema is `false`' };
  if (!isPlainObject(schema)) return undefined;
  const s = schema;
  const here = (reason: string): Unsatisfiable => ({ pointer, reason });

  if (Array.isArray(s['type']) && s['type'].length === 0) return here('`type` is an empty list');
  if (Array.isArray(s['enum'])) {
    if (s['enum'].length === 0) return here('`enum` is empty');
    // An enum is satisfiable only if one of its values passes the whole schema it sits in.
    let validator;
    try {
      validator = compileSchema(s);
    } catch {
      return undefined;
    }
    if (!s['enum'].some((v) => validator(v))) {
      return here(`no value of enum ${JSON.stringify(s['enum']).slice(0, 80)} satisfies the rest of the schema (type ${JSON.stringify(s['type'])})`);
    }
  }
  if ('const' in s) {
    try {
      if (!compileSchema(s)(s['const'])) return here(`const ${JSON.stringify(s['const'])} does not satisfy the rest of the schema`);
    } catch {
      return undefined;
    }
  }

  const num = (k: string): number | undefined => (typeof s[k] === 'number' ? (s[k] as number) : undefined);
  const lo = num('minimum');
  const hi = num('maximum');
  const xlo = num('exclusiveMinimum');
  const xhi = num('exclusiveMaximum');
  const types = typeof s['type'] === 'string' ? [s['type']] : Array.isArray(s['type']) ? (s['type'] as unknown[]) : undefined;
  const onlyNumeric = types !== undefined && types.every((t) => t === 'number' || t === 'integer');
  if (onlyNumeric) {
    const low = Math.max(lo ?? -Infinity, xlo ?? -Infinity);
    const high = Math.min(hi ?? Infinity, xhi ?? Infinity);
    const lowOpen = xlo !== undefined && xlo >= (lo ?? -Infinity);
    const highOpen = xhi !== undefined && xhi <= (hi ?? Infinity);
    if (low > high || (low === high && (lowOpen || highOpen))) return here(`no number lies between the lower bound ${low} and the upper bound ${high}`);
    if (types.every((t) => t === 'integer') && Number.isFinite(low) && Number.isFinite(high)) {
      const first = lowOpen && Number.isInteger(low) ? low + 1 : Math.ceil(low);
      const last = highOpen && Number.isInteger(high) ? high - 1 : Math.floor(high);
      if (first > last) return here(`no integer lies between ${low} and ${high}`);
    }
  }
  const pair = (min: string, max: string, what: string): Unsatisfiable | undefined => {
    const a = num(min);
    const b = num(max);
    return a !== undefined && b !== undefined && a > b ? here(`${min} ${a} is greater than ${max} ${b}: no ${what} fits`) : undefined;
  };
  const bound = pair('minLength', 'maxLength', 'string') ?? pair('minItems', 'maxItems', 'array') ?? pair('minProperties', 'maxProperties', 'object');
  if (bound && (types === undefined || types.length === 1)) return bound;

  const onlyObject = types !== undefined && types.length === 1 && types[0] === 'object';
  if (onlyObject && Array.isArray(s['required'])) {
    const props = isPlainObject(s['properties']) ? s['properties'] : {};
    for (const key of s['required']) {
      if (typeof key !== 'string') continue;
      const sub = Object.hasOwn(props, key) ? props[key] : undefined;
      const subPointer = `${pointer}/properties/${escapePointerToken(key)}`;
      if (sub === undefined && s['additionalProperties'] === false && !isPlainObject(s['patternProperties'])) {
        return here(`'${key}' is required but the object is closed and does not declare it`);
      }
      if (sub !== undefined) {
        const inner = findUnsatisfiable(sub as JsonSchema, subPointer);
        if (inner) return { pointer: inner.pointer, reason: `required property '${key}': ${inner.reason}` };
      }
    }
  }
  const onlyArray = types !== undefined && types.length === 1 && types[0] === 'array';
  if (onlyArray && (num('minItems') ?? 0) > 0 && s['items'] !== undefined && !Array.isArray(s['items'])) {
    const inner = findUnsatisfiable(s['items'] as JsonSchema, `${pointer}/items`);
    if (inner) return { pointer: inner.pointer, reason: `items are required (minItems ${num('minItems')}) but ${inner.reason}` };
  }

  if (Array.isArray(s['allOf'])) {
    for (const [i, b] of s['allOf'].entries()) {
      const inner = findUnsatisfiable(b as JsonSchema, `${pointer}/allOf/${i}`);
      if (inner) return inner;
    }
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = s[key];
    if (Array.isArray(branches) && branches.length > 0) {
      const reasons = branches.map((b, i) => findUnsatisfiable(b as JsonSchema, `${pointer}/${key}/${i}`));
      if (reasons.every((r) => r !== undefined)) return here(`every branch of ${key} is unsatisfiable (${reasons[0]?.reason})`);
    }
  }
  if (s['not'] === true || (isPlainObject(s['not']) && Object.keys(s['not']).length === 0)) return here('`not` of a schema that accepts everything');
  return undefined;
}
