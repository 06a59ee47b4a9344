/**
 * Direction-aware schema comparison by validity sets. `compare(producer, consumer)` asks: does
 * the consumer accept every value the producer may produce? Each rule that finds the consumer
 * tighter proposes candidate values; a candidate is embedded into a whole payload and reported
 * as a **breaking** finding only if ajv confirms it valid under the producer's schema and invalid
 * under the consumer's. Tightening with no confirmed witness is a **warning** ("could not
 * decide"); loosening is **info**. A final sampling pass catches narrowings no rule explained.
 *
 * Over 500 lines on purpose: the rules are one table over one pair of normalized schemas, and a
 * rule read beside the others (keywords, formats, composition) is how a reviewer checks that
 * they agree on direction; split, they would each repeat the walk.
 */
import { generateSync } from 'json-schema-faker';
import { compileSchema, type JsonSchema } from '../schema/ajv.js';
import { deepEqual } from '../state/patch.js';
import { escapePointerToken, isPlainObject } from '../shared/json.js';
import { hashSeed, Rng } from '../shared/rng.js';
import { mergeAllOf, sample, sampleOfType, typesOf } from '../generate/sample.js';
import { normalize, type Schema, type SchemaObject } from '../schema/normalize.js';
import { instancePath, NONE, place, setAt, type Frame } from './payload-path.js';

/** How bad a schema change is for consumers: `breaking` fails CI by default, `warning` is risky, `info` is safe. */
export type Severity = 'breaking' | 'warning' | 'info';

/** One difference between two JSON Schemas, before it is placed in an env (which schema, which action) and checked against ignores. */
export interface RawFinding {
  readonly rule: string;
  readonly severity: Severity;
  /** JSON pointer of the keyword in the schema (logical: `$ref`s resolved). */
  readonly pointer: string;
  /** Where in a payload the difference bites; `*` stands for any array item or map key. */
  readonly instancePath: string;
  /** What changed, in one clause. */
  readonly change: string;
  /** A whole payload valid under the producer's schema and invalid under the consumer's. */
  readonly witness?: unknown;
}

export interface CompareOptions {
  /** Which side is the producer; rule ids and texts always describe the change from old to new. Default 'old'. */
  readonly producer?: 'old' | 'new';
  /** oasdiff's reading: consumers ignore undeclared keys, so closing an object or dropping a key's declaration is not breaking. */
  readonly tolerant?: boolean;
  readonly seed?: number;
}

const ALL_TYPES = ['null', 'boolean', 'object', 'array', 'number', 'integer', 'string'];
const EXTRA_KEY = 'undeclared_key';

/** Compares a producer's schema with a consumer's and lists every difference with its rule, pointer and severity. */
export function compareSchemas(producerRoot: JsonSchema, consumerRoot: JsonSchema, options: CompareOptions = {}): RawFinding[] {
  return new Comparer(producerRoot, consumerRoot, options, false).run();
}

class Comparer {
  readonly #producer: (v: unknown) => boolean;
  readonly #consumer: (v: unknown) => boolean;
  readonly #producerRoot: JsonSchema;
  readonly #consumerRoot: JsonSchema;
  readonly #options: CompareOptions;
  /** A probe only asks "does anything tighten?": it records findings without searching for witnesses. */
  readonly #probe: boolean;
  readonly #findings: RawFinding[] = [];
  readonly #visiting = new Set<string>();
  readonly #ids = new WeakMap<object, number>();
  #nextId = 0;

  constructor(producerRoot: JsonSchema, consumerRoot: JsonSchema, options: CompareOptions, probe: boolean) {
    const p = compileSchema(producerRoot);
    const c = compileSchema(consumerRoot);
    this.#producer = (v) => p(v);
    this.#consumer = (v) => c(v);
    this.#producerRoot = producerRoot;
    this.#consumerRoot = consumerRoot;
    this.#options = options;
    this.#probe = probe;
  }

  run(): RawFinding[] {
    this.#compare(normalize(this.#producerRoot), normalize(this.#consumerRoot), '', []);
    if (!this.#findings.some((f) => f.severity === 'breaking')) this.#sampleCheck();
    return this.#findings;
  }

  /**
   * Rule ids and texts describe the change from old to new. The walk goes producer → consumer; when the
   * producer is the new side, a consumer that is tighter means the schema was loosened, and the
   * other way round. `pair` is [name when the new side is tighter, name when it is looser].
   */
  #r(pair: readonly [string, string], consumerTighter: boolean): string {
    return this.#newIsConsumer === consumerTighter ? pair[0] : pair[1];
  }

  /** `label old → new`. */
  #arrow(label: string, p: unknown, c: unknown): string {
    const [o, n] = this.#newIsConsumer ? [p, c] : [c, p];
    return `${label} ${String(o)} → ${String(n)}`;
  }

  get #newIsConsumer(): boolean {
    return (this.#options.producer ?? 'old') === 'old';
  }

  #id(o: Schema): string {
    if (typeof o === 'boolean') return String(o);
    let id = this.#ids.get(o);
    if (id === undefined) {
      id = this.#nextId++;
      this.#ids.set(o, id);
    }
    return String(id);
  }

  #add(rule: string, severity: Severity, pointer: string, frames: readonly Frame[], change: string, witness?: unknown): void {
    this.#findings.push({ rule, severity, pointer, instancePath: instancePath(frames), change, ...(witness !== undefined ? { witness } : {}) });
  }

  /** Report a tightening: breaking with the first confirmed candidate, else a warning that says why it is undecided. */
  #tightened(rule: string, pointer: string, frames: readonly Frame[], change: string, candidates: readonly unknown[]): void {
    if (this.#probe) {
      this.#add(rule, 'warning', pointer, frames, change);
      return;
    }
    const witness = this.#confirm(candidates, frames);
    if (witness !== NONE) this.#add(rule, 'breaking', pointer, frames, change, witness);
    else this.#add(rule, 'warning', pointer, frames, `${change} (no value was found that the old side accepts and the new side rejects; check by hand)`);
  }

  #confirm(candidates: readonly unknown[], frames: readonly Frame[]): unknown {
    for (const local of candidates) {
      if (local === undefined) continue;
      for (const payload of this.#embeddings(local, frames)) {
        if (this.#producer(payload) && !this.#consumer(payload)) return payload;
      }
    }
    return NONE;
  }

  /** Whole payloads carrying `local` at the frames' path: built from samples, then from generated producer values. */
  *#embeddings(local: unknown, frames: readonly Frame[]): Generator<unknown> {
    let value = local;
    for (let i = frames.length - 1; i >= 0; i--) value = place(frames[i] as Frame, value, sample(frames[i]?.P ?? true, frames[i]?.via === 'item' || frames[i]?.via === 'index' ? 'array' : 'object'));
    yield value;
    const rng = new Rng(hashSeed(this.#options.seed ?? 0, 'embed', frames.length));
    for (let attempt = 0; attempt < 3; attempt++) {
      let base: unknown;
      try {
        base = generateSync(this.#producerRoot as never, { seed: rng.int(1, 2 ** 30), optionalsProbability: 1 });
      } catch {
        return;
      }
      const placed = setAt(base, frames, local);
      if (placed !== NONE) yield placed;
    }
  }

  #compare(Pin: Schema, Cin: Schema, pointer: string, frames: readonly Frame[]): void {
    const pair = `${this.#id(Pin)}|${this.#id(Cin)}`;
    if (this.#visiting.has(pair) || frames.length > 24) return; // recursive schemas: each pair once
    this.#visiting.add(pair);
    try {
      this.#compareNode(Pin, Cin, pointer, frames);
    } finally {
      this.#visiting.delete(pair);
    }
  }

  #compareNode(Pin: Schema, Cin: Schema, pointer: string, frames: readonly Frame[]): void {
    if (Cin === true || Pin === false) {
      if (Cin === true && Pin !== true && Pin !== false && Object.keys(Pin).some((k) => k !== 'default')) this.#add(this.#r(['constraints-added', 'constraints-removed'], false), 'info', pointer, frames, this.#newIsConsumer ? 'constraints removed: any value is accepted' : 'constraints added');
      return;
    }
    if (Cin === false) {
      this.#tightened(this.#r(['schema-false', 'schema-true'], true), pointer, frames, this.#newIsConsumer ? 'now accepts no value at all' : 'no longer `false`: values are accepted', [sample(Pin)]);
      return;
    }
    // A producer that allowed anything at all meets a consumer with constraints: one finding, not one per JSON type.
    if (Pin === true || !Object.keys(Pin).some((k) => k !== 'default')) {
      if (Object.keys(Cin).some((k) => k !== 'default')) {
        this.#tightened(this.#r(['constraints-added', 'constraints-removed'], true), pointer, frames, this.#newIsConsumer ? 'constrained where any value was accepted' : 'any value is now accepted', [
          null, 'x', 1, 0.5, true, {}, [], -1, '',
        ]);
      }
      return;
    }
    const P = mergeAllOf(Pin);
    const C = Cin;
    // Consumer allOf: the producer must satisfy every branch.
    if (Array.isArray(C['allOf'])) {
      const { allOf, ...rest } = C;
      (allOf as Schema[]).forEach((b, i) => this.#compare(P, b, `${pointer}/allOf/${i}`, frames));
      this.#compare(P, rest, pointer, frames);
      return;
    }
    // Producer anyOf/oneOf: every branch must be accepted.
    for (const key of ['anyOf', 'oneOf'] as const) {
      if (Array.isArray(P[key]) && !Array.isArray(C[key])) {
        const { [key]: branches, ...rest } = P;
        (branches as Schema[]).forEach((b, i) => this.#compare(isPlainObject(b) ? { ...rest, ...b } : b, C, `${pointer}/${key}/${i}`, frames));
        return;
      }
    }
    if (Array.isArray(C['anyOf']) || Array.isArray(C['oneOf'])) {
      this.#compareBranches(P, C, pointer, frames);
      return;
    }
    this.#compareDefault(P, C, pointer, frames);
    this.#compareTypes(P, C, pointer, frames);
    if (this.#compareEnum(P, C, pointer, frames)) return;
    const common = typesOf(P).filter((t) => typesOf(C).includes(t) || (t === 'integer' && typesOf(C).includes('number')));
    if (common.includes('number') || common.includes('integer')) this.#compareNumbers(P, C, pointer, frames, common.includes('number') ? 'number' : 'integer');
    if (common.includes('string')) this.#compareStrings(P, C, pointer, frames);
    if (common.includes('array')) this.#compareArrays(P, C, pointer, frames);
    if (common.includes('object')) this.#compareObjects(P, C, pointer, frames);
    if (C['not'] !== undefined && !sameSchema(P['not'], C['not'])) {
      const rule = P['not'] === undefined ? this.#r(['not-added', 'not-removed'], true) : 'not-changed';
      this.#tightened(rule, `${pointer}/not`, frames, `'not' ${P['not'] === undefined ? (this.#newIsConsumer ? 'added' : 'removed') : 'changed'}`, [sample(C['not'] as Schema), sample(P)]);
    } else if (P['not'] !== undefined && C['not'] === undefined) {
      this.#add(this.#r(['not-added', 'not-removed'], false), 'info', `${pointer}/not`, frames, `'not' ${this.#newIsConsumer ? 'removed' : 'added'}`);
    }
    // if/then/else is one conditional: one finding when any part of it differs.
    const conditional = (s: SchemaObject): unknown[] => [s['if'], s['then'], s['else']];
    if (C['if'] !== undefined && !sameSchema(conditional(P), conditional(C))) {
      // The telling values satisfy the `if` (so `then` applies) or fail it (so `else` does).
      const withIf = isPlainObject(C['if']) ? sample(mergeAllOf({ allOf: [P, C['if'] as Schema] })) : undefined;
      this.#tightened('conditional-changed', `${pointer}/if`, frames, `if/then/else ${P['if'] === undefined ? (this.#newIsConsumer ? 'added' : 'removed') : 'changed'}`, [withIf, sample(P), sample((C['else'] ?? true) as Schema), sample((C['then'] ?? true) as Schema)]);
    } else if (P['if'] !== undefined && C['if'] === undefined) {
      this.#add('conditional-changed', 'info', `${pointer}/if`, frames, `if/then/else ${this.#newIsConsumer ? 'removed' : 'added'}`);
    }
  }

  #compareDefault(P: SchemaObject, C: SchemaObject, pointer: string, frames: readonly Frame[]): void {
    if ('default' in P && 'default' in C && !deepEqual(P['default'], C['default'])) {
      this.#add('default-changed', 'warning', `${pointer}/default`, frames, `default changed from ${JSON.stringify(P['default'])} to ${JSON.stringify(C['default'])}: callers that omit it now get different behaviour`);
    }
  }

  #compareTypes(P: SchemaObject, C: SchemaObject, pointer: string, frames: readonly Frame[]): void {
    const pt = typesOf(P);
    const ct = typesOf(C);
    const accepted = (t: string): boolean => ct.includes(t) || (t === 'integer' && ct.includes('number'));
    const removed = pt.filter((t) => !accepted(t));
    // number → integer keeps the integers: a fractional number is the witness.
    const fractionalLost = pt.includes('number') && !ct.includes('number') && ct.includes('integer');
    for (const t of removed) {
      if (t === 'number' && fractionalLost) continue;
      const rule = t === 'null' ? this.#r(['nullability-removed', 'nullability-added'], true) : removed.length === pt.length ? 'type-changed' : this.#r(['type-narrowed', 'type-widened'], true);
      const what = t === 'null' ? (this.#newIsConsumer ? 'null is no longer allowed' : 'null is now allowed') : `type '${t}' ${this.#newIsConsumer ? 'is no longer' : 'is now'} allowed`;
      this.#tightened(rule, `${pointer}/type`, frames, `${what} (${this.#arrow('', fmtTypes(pt), fmtTypes(ct)).trim()})`, [sampleOfType(P, t)]);
    }
    if (fractionalLost) {
      const v = sampleOfType(P, 'number') as number;
      this.#tightened(this.#r(['type-narrowed', 'type-widened'], true), `${pointer}/type`, frames, this.#newIsConsumer ? 'number narrowed to integer' : 'integer widened to number', [v + 0.5, 0.5, v - 0.5, 1.5]);
    }
    const added = ct.filter((t) => !pt.includes(t) && !(t === 'integer' && pt.includes('number')));
    if (added.length > 0 && P['type'] !== undefined) this.#add(added.includes('null') ? this.#r(['nullability-removed', 'nullability-added'], false) : this.#r(['type-narrowed', 'type-widened'], false), 'info', `${pointer}/type`, frames, `${this.#newIsConsumer ? 'now also accepts' : 'no longer accepts'} ${added.join(', ')}`);
  }

  /** Returns true when the consumer's enum settles the node (no further keyword checks needed). */
  #compareEnum(P: SchemaObject, C: SchemaObject, pointer: string, frames: readonly Frame[]): boolean {
    const list = (s: SchemaObject): unknown[] | undefined => ('const' in s ? [s['const']] : Array.isArray(s['enum']) ? (s['enum'] as unknown[]) : undefined);
    const pe = list(P);
    const ce = list(C);
    const at = `${pointer}/${'const' in C ? 'const' : 'enum'}`;
    if (ce) {
      if (pe) {
        const missing = pe.filter((v) => !ce.some((c) => deepEqual(c, v)));
        if (missing.length > 0) this.#tightened(this.#r(['enum-value-removed', 'enum-value-added'], true), at, frames, `${missing.map((v) => JSON.stringify(v)).join(', ')} ${this.#newIsConsumer ? 'no longer' : 'now'} allowed`, missing);
        const added = ce.filter((v) => !pe.some((p) => deepEqual(p, v)));
        if (added.length > 0) this.#add(this.#r(['enum-value-removed', 'enum-value-added'], false), 'info', at, frames, `${added.map((v) => JSON.stringify(v)).join(', ')} ${this.#newIsConsumer ? 'now' : 'no longer'} allowed`);
        return true;
      }
      const candidates = [sample(P), ...typesOf(P).map((t) => sampleOfType(P, t)), 'x', 'other', 0, 1, -1, true, null, {}, []].filter((v) => !ce.some((c) => deepEqual(c, v)));
      this.#tightened(this.#r(['enum-added', 'enum-removed'], true), at, frames, this.#newIsConsumer ? `restricted to ${JSON.stringify(ce).slice(0, 80)}` : `no longer restricted to ${JSON.stringify(ce).slice(0, 80)}`, candidates);
      return true;
    }
    if (pe) {
      this.#add(this.#r(['enum-added', 'enum-removed'], false), 'info', `${pointer}/enum`, frames, this.#newIsConsumer ? 'no longer restricted to a list of values' : 'now restricted to a list of values');
      // The producer's values must still pass the consumer's other keywords.
      const rejected = pe.filter((v) => !this.#localOk(C, v));
      if (rejected.length > 0) this.#tightened('enum-value-rejected', pointer, frames, `${rejected.map((v) => JSON.stringify(v)).join(', ')} ${this.#newIsConsumer ? 'no longer' : 'now'} valid`, rejected);
      return true;
    }
    return false;
  }

  #localOk(C: SchemaObject, v: unknown): boolean {
    try {
      return compileSchema(stripCycles(C))(v);
    } catch {
      return true;
    }
  }

  #compareNumbers(P: SchemaObject, C: SchemaObject, pointer: string, frames: readonly Frame[], type: 'number' | 'integer'): void {
    const lo = (s: SchemaObject): { v: number; open: boolean } | undefined => bound(s, 'minimum', 'exclusiveMinimum', Math.max);
    const hi = (s: SchemaObject): { v: number; open: boolean } | undefined => bound(s, 'maximum', 'exclusiveMaximum', Math.min);
    const eps = type === 'integer' ? 1 : 0.5;
    const pl = lo(P);
    const cl = lo(C);
    if (cl && (!pl || pl.v < cl.v || (pl.v === cl.v && !pl.open && cl.open))) {
      const candidates = [pl && !pl.open ? pl.v : undefined, cl.open ? cl.v : cl.v - eps, cl.v - eps * 10, pl ? (pl.v + cl.v) / 2 : undefined].filter((v) => v !== undefined);
      this.#tightened(this.#r(['minimum-raised', 'minimum-lowered'], true), `${pointer}/${cl.open ? 'exclusiveMinimum' : 'minimum'}`, frames, this.#arrow('lower bound', pl ? fmtBound(pl, '>') : 'none', fmtBound(cl, '>')), candidates);
    } else if (pl && (!cl || cl.v < pl.v)) this.#add(this.#r(['minimum-raised', 'minimum-lowered'], false), 'info', `${pointer}/minimum`, frames, this.#arrow('lower bound', fmtBound(pl, '>'), cl ? fmtBound(cl, '>') : 'none'));
    const ph = hi(P);
    const ch = hi(C);
    if (ch && (!ph || ph.v > ch.v || (ph.v === ch.v && !ph.open && ch.open))) {
      const candidates = [ph && !ph.open ? ph.v : undefined, ch.open ? ch.v : ch.v + eps, ch.v + eps * 10, ph ? (ph.v + ch.v) / 2 : undefined].filter((v) => v !== undefined);
      this.#tightened(this.#r(['maximum-lowered', 'maximum-raised'], true), `${pointer}/${ch.open ? 'exclusiveMaximum' : 'maximum'}`, frames, this.#arrow('upper bound', ph ? fmtBound(ph, '<') : 'none', fmtBound(ch, '<')), candidates);
    } else if (ph && (!ch || ch.v > ph.v)) this.#add(this.#r(['maximum-lowered', 'maximum-raised'], false), 'info', `${pointer}/maximum`, frames, this.#arrow('upper bound', fmtBound(ph, '<'), ch ? fmtBound(ch, '<') : 'none'));
    const pm = typeof P['multipleOf'] === 'number' ? P['multipleOf'] : undefined;
    const cm = typeof C['multipleOf'] === 'number' ? C['multipleOf'] : undefined;
    if (cm !== undefined && (pm === undefined || !isMultiple(pm, cm))) {
      const base = (sampleOfType(P, type) as number) || 0;
      const unit = pm ?? (type === 'integer' ? 1 : 0.1);
      const candidates = [pm, base + unit, base + cm / 2, unit, cm / 2, cm * 1.5, 1, 0.5, 0.1, 3, 7].filter((v) => v !== undefined);
      this.#tightened(pm === undefined ? this.#r(['multiple-of-added', 'multiple-of-removed'], true) : 'multiple-of-changed', `${pointer}/multipleOf`, frames, this.#arrow('multipleOf', pm ?? 'none', cm), candidates);
    } else if (pm !== undefined && (cm === undefined || !isMultiple(cm, pm))) this.#add(cm === undefined ? this.#r(['multiple-of-added', 'multiple-of-removed'], false) : 'multiple-of-changed', 'info', `${pointer}/multipleOf`, frames, this.#arrow('multipleOf', pm, cm ?? 'none'));
  }

  #compareStrings(P: SchemaObject, C: SchemaObject, pointer: string, frames: readonly Frame[]): void {
    this.#counts(P, C, pointer, frames, 'minLength', 'maxLength', 'string-length', (n) => 'a'.repeat(n));
    const pp = P['pattern'];
    const cp = C['pattern'];
    if (typeof cp === 'string' && cp !== pp) {
      const re = safeRegExp(cp);
      const pre = typeof pp === 'string' ? safeRegExp(pp) : undefined;
      const pool = ['', 'a', 'A', 'Z', '0', '9', ' ', '-', '_', '.', 'aa', 'a b', '0a', 'a0', 'aaaaaaaa', '#', 'é', sample(P) as string];
      const rng = new Rng(hashSeed(this.#options.seed ?? 0, pointer));
      const fromPattern = (pattern: string, n: number): void => {
        for (let i = 0; i < n; i++) {
          try {
            pool.push(generateSync({ type: 'string', pattern }, { seed: rng.int(1, 2 ** 30) }) as string);
          } catch {
            break;
          }
        }
      };
      if (typeof pp === 'string') fromPattern(pp, 24);
      // Values of the new pattern too: with a prefix or suffix they tell an anchored pattern from
      // the unanchored one it replaced (`\d{4}` → `^\d{4}$`: witness "x1234").
      fromPattern(cp, 8);
      const padded = pool.filter((v) => typeof v === 'string').flatMap((v) => [v, `x${v}`, `${v}x`, `0${v}`, `${v}0`, ` ${v}`, `${v} `, `${v}\n`, `${v}${v}`]);
      const candidates = padded.filter((v) => (!re || !re.test(v)) && (!pre || pre.test(v)));
      this.#tightened(pp === undefined ? this.#r(['pattern-added', 'pattern-removed'], true) : 'pattern-changed', `${pointer}/pattern`, frames, this.#arrow('pattern', pp === undefined ? 'none' : JSON.stringify(pp), JSON.stringify(cp)), candidates);
    } else if (typeof pp === 'string' && cp === undefined) this.#add(this.#r(['pattern-added', 'pattern-removed'], false), 'info', `${pointer}/pattern`, frames, this.#arrow('pattern', JSON.stringify(pp), 'none'));
    const pf = P['format'];
    const cf = C['format'];
    if (typeof cf === 'string' && cf !== pf) {
      this.#tightened(pf === undefined ? this.#r(['format-added', 'format-removed'], true) : 'format-changed', `${pointer}/format`, frames, this.#arrow('format', pf === undefined ? 'none' : JSON.stringify(pf), JSON.stringify(cf)), [sample(P), 'not a valid ' + cf, '', 'x', '2024-13-45', 'a@', '::::']);
    } else if (typeof pf === 'string' && cf === undefined) this.#add(this.#r(['format-added', 'format-removed'], false), 'info', `${pointer}/format`, frames, this.#arrow('format', JSON.stringify(pf), 'none'));
  }

  /** min/max counts (lengths, item and property counts). */
  #counts(P: SchemaObject, C: SchemaObject, pointer: string, frames: readonly Frame[], minKey: string, maxKey: string, rule: string, make: (n: number) => unknown): void {
    const n = (s: SchemaObject, k: string): number | undefined => (typeof s[k] === 'number' ? (s[k] as number) : undefined);
    const [pmin, cmin, pmax, cmax] = [n(P, minKey), n(C, minKey), n(P, maxKey), n(C, maxKey)];
    const minPair = [`${rule}-min-raised`, `${rule}-min-lowered`] as const;
    const maxPair = [`${rule}-max-lowered`, `${rule}-max-raised`] as const;
    if (cmin !== undefined && (pmin ?? 0) < cmin) this.#tightened(this.#r(minPair, true), `${pointer}/${minKey}`, frames, this.#arrow(minKey, pmin ?? 0, cmin), [make(pmin ?? 0), make(cmin - 1)]);
    else if (pmin !== undefined && (cmin ?? 0) < pmin) this.#add(this.#r(minPair, false), 'info', `${pointer}/${minKey}`, frames, this.#arrow(minKey, pmin, cmin ?? 0));
    if (cmax !== undefined && (pmax === undefined || pmax > cmax)) this.#tightened(this.#r(maxPair, true), `${pointer}/${maxKey}`, frames, this.#arrow(maxKey, pmax ?? 'none', cmax), [make(cmax + 1), ...(pmax !== undefined ? [make(pmax)] : [])]);
    else if (pmax !== undefined && (cmax === undefined || cmax > pmax)) this.#add(this.#r(maxPair, false), 'info', `${pointer}/${maxKey}`, frames, this.#arrow(maxKey, pmax, cmax ?? 'none'));
  }

  #compareArrays(P: SchemaObject, C: SchemaObject, pointer: string, frames: readonly Frame[]): void {
    const itemOf = (s: SchemaObject): Schema => (s['items'] as Schema | undefined) ?? true;
    const pPrefix = (P['prefixItems'] as Schema[] | undefined) ?? [];
    const cPrefix = (C['prefixItems'] as Schema[] | undefined) ?? [];
    for (let i = 0; i < Math.max(pPrefix.length, cPrefix.length); i++) {
      this.#compare(pPrefix[i] ?? itemOf(P), cPrefix[i] ?? itemOf(C), `${pointer}/prefixItems/${i}`, [...frames, { P, key: String(i), via: 'index' }]);
    }
    this.#compare(itemOf(P), itemOf(C), `${pointer}/items`, [...frames, { P, key: '*', via: 'item' }]);
    const item = sample(itemOf(P));
    this.#counts(P, C, pointer, frames, 'minItems', 'maxItems', 'item-count', (n) => Array.from({ length: n }, () => item));
    if (C['uniqueItems'] === true && P['uniqueItems'] !== true) this.#tightened(this.#r(['unique-items-added', 'unique-items-removed'], true), `${pointer}/uniqueItems`, frames, this.#newIsConsumer ? 'items must now be unique' : 'items need no longer be unique', [[item, item]]);
    else if (P['uniqueItems'] === true && C['uniqueItems'] !== true) this.#add(this.#r(['unique-items-added', 'unique-items-removed'], false), 'info', `${pointer}/uniqueItems`, frames, this.#newIsConsumer ? 'items need no longer be unique' : 'items must now be unique');
    if (C['contains'] !== undefined && !sameSchema(P['contains'], C['contains'])) {
      this.#tightened(P['contains'] === undefined ? this.#r(['contains-added', 'contains-removed'], true) : 'contains-changed', `${pointer}/contains`, frames, `'contains' ${P['contains'] === undefined ? (this.#newIsConsumer ? 'added' : 'removed') : 'changed'}`, [[], [item], sample(P)]);
    }
  }

  #compareObjects(P: SchemaObject, C: SchemaObject, pointer: string, frames: readonly Frame[]): void {
    const tolerant = this.#options.tolerant === true;
    const props = (s: SchemaObject): Record<string, Schema> => (s['properties'] as Record<string, Schema> | undefined) ?? {};
    const extra = (s: SchemaObject): Schema => (tolerant && s === C && s['additionalProperties'] === false ? true : ((s['additionalProperties'] as Schema | undefined) ?? true));
    const forKey = (s: SchemaObject, key: string): Schema => {
      if (Object.hasOwn(props(s), key)) return props(s)[key] as Schema;
      const patterns = (s['patternProperties'] as Record<string, Schema> | undefined) ?? {};
      for (const [re, sub] of Object.entries(patterns)) if (safeRegExp(re)?.test(key)) return sub;
      return extra(s);
    };
    const pp = props(P);
    const cp = props(C);
    for (const key of new Set([...Object.keys(pp), ...Object.keys(cp)])) {
      const inP = Object.hasOwn(pp, key);
      const inC = Object.hasOwn(cp, key);
      // Tolerant consumers ignore keys the producer does not declare.
      if (tolerant && !inP) continue;
      const pointerHere = `${pointer}/properties/${escapePointerToken(key)}`;
      if (inP && !inC && forKey(C, key) === false) {
        // Declared on the producer's side, forbidden (closed object) on the consumer's.
        this.#tightened(this.#r(['property-removed', 'property-added'], true), pointerHere, frames, `property '${key}' ${this.#newIsConsumer ? 'removed from' : 'added to'} a closed object`, [
          { ...(sample(P) as object), [key]: sample(pp[key] as Schema) },
        ]);
        continue;
      }
      const before = this.#findings.length;
      this.#compare(forKey(P, key), forKey(C, key), pointerHere, [...frames, { P, key, via: 'property' }]);
      // Declared on one side only: say so, unless the comparison just found that it bites there.
      if (inP !== inC && !this.#findings.slice(before).some((f) => f.severity !== 'info' && f.pointer === pointerHere)) {
        // "declared"/"no longer declared" says what a "constraints added/removed" info there would.
        for (let i = this.#findings.length - 1; i >= before; i--) if (this.#findings[i]?.pointer === pointerHere && this.#findings[i]?.rule.startsWith('constraints-')) this.#findings.splice(i, 1);
        const inNew = this.#newIsConsumer ? inC : inP;
        this.#add(inNew ? 'property-added' : 'property-removed', 'info', pointerHere, frames, `property '${key}' ${inNew ? 'declared' : 'no longer declared'}`);
      }
    }
    // Keys neither side declares.
    const pe = extra(P);
    const ce = extra(C);
    if (ce === false && pe !== false) {
      this.#tightened(this.#r(['object-closed', 'object-opened'], true), `${pointer}/additionalProperties`, frames, this.#newIsConsumer ? 'undeclared properties are no longer allowed' : 'undeclared properties are now allowed', [{ ...(sample(P) as object), [EXTRA_KEY]: sample(pe) }]);
    } else if (pe === false && ce !== false) {
      this.#add(this.#r(['object-closed', 'object-opened'], false), 'info', `${pointer}/additionalProperties`, frames, this.#newIsConsumer ? 'undeclared properties are now allowed' : 'undeclared properties are no longer allowed');
    } else if (pe !== false && ce !== false && (pe !== true || ce !== true)) {
      this.#compare(pe, ce, `${pointer}/additionalProperties`, [...frames, { P, key: EXTRA_KEY, via: 'extra' }]);
    }
    // Each finding points at the key's entry in the `required` list that has it, so it can be ignored on its own.
    const preq = (P['required'] as string[] | undefined) ?? [];
    const creq = (C['required'] as string[] | undefined) ?? [];
    creq.forEach((key, i) => {
      if (preq.includes(key)) return;
      const base = sample(P) as Record<string, unknown>;
      const { [key]: _dropped, ...without } = isPlainObject(base) ? base : {};
      this.#tightened(this.#r(['required-added', 'required-removed'], true), `${pointer}/required/${i}`, frames, `property '${key}' is ${this.#newIsConsumer ? 'now' : 'no longer'} required`, [without]);
    });
    preq.forEach((key, i) => {
      if (!creq.includes(key)) this.#add(this.#r(['required-added', 'required-removed'], false), 'info', `${pointer}/required/${i}`, frames, `property '${key}' is ${this.#newIsConsumer ? 'no longer' : 'now'} required`);
    });
    this.#counts(P, C, pointer, frames, 'minProperties', 'maxProperties', 'property-count', (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, sample(forKey(P, `k${i}`))])));
    const pdr = (P['dependentRequired'] as Record<string, string[]> | undefined) ?? {};
    const cdr = (C['dependentRequired'] as Record<string, string[]> | undefined) ?? {};
    for (const [trigger, deps] of Object.entries(cdr)) {
      const before = new Set(pdr[trigger] ?? []);
      const added = deps.filter((d) => !before.has(d));
      if (added.length === 0) continue;
      const withTrigger = { ...(sample(P) as object), [trigger]: sample(forKey(P, trigger)) } as Record<string, unknown>;
      const base = Object.fromEntries(Object.entries(withTrigger).filter(([k]) => !added.includes(k)));
      this.#tightened(this.#r(['dependent-required-added', 'dependent-required-removed'], true), `${pointer}/dependentRequired/${escapePointerToken(trigger)}`, frames, `'${trigger}' ${this.#newIsConsumer ? 'now requires' : 'no longer requires'} ${added.map((d) => `'${d}'`).join(', ')}`, [base]);
    }
    for (const key of ['dependentSchemas', 'propertyNames', 'patternProperties'] as const) {
      if (C[key] !== undefined && !sameSchema(P[key], C[key])) {
        const base = sample(P) as object;
        // Telling keys: the triggers of dependent schemas, keys generated from each pattern, and odd names.
        const keys = [...Object.keys((C[key] as object | undefined) ?? {}), ...Object.keys((P[key] as object | undefined) ?? {})].flatMap((k) => (key === 'patternProperties' ? keysMatching(k) : [k]));
        const candidates = [...keys.map((k) => ({ ...base, [k]: sample(forKey(P, k)) })), { ...base, [EXTRA_KEY]: 1 }, { ...base, 'Bad-Key!': 'x' }, base];
        this.#tightened(`${camelToKebab(key)}-changed`, `${pointer}/${key}`, frames, `'${key}' ${P[key] === undefined ? (this.#newIsConsumer ? 'added' : 'removed') : 'changed'}`, candidates);
      }
    }
  }

  /** Consumer anyOf/oneOf: each producer branch must land in some consumer branch (exactly one, for oneOf). */
  #compareBranches(P: SchemaObject, C: SchemaObject, pointer: string, frames: readonly Frame[]): void {
    const key = Array.isArray(C['oneOf']) ? 'oneOf' : 'anyOf';
    const { [key]: rawBranches, ...cRest } = C;
    const cBranches = (rawBranches as Schema[]).map((b) => (isPlainObject(b) ? { ...cRest, ...b } : b));
    const pKey = Array.isArray(P['oneOf']) ? 'oneOf' : Array.isArray(P['anyOf']) ? 'anyOf' : undefined;
    const pBranches = pKey ? (P[pKey] as Schema[]).map((b) => (isPlainObject(b) ? { ...P, [pKey]: undefined, ...b } : b)) : [P];
    pBranches.forEach((pb, i) => {
      // A branch fits if comparing it with some consumer branch finds nothing breaking or undecided.
      const fits = cBranches.some((cb) => {
        const probe = new Comparer(true, true, this.#options, true);
        probe.#compare(pb, cb, pointer, []);
        return !probe.#findings.some((f) => f.severity !== 'info' && f.rule !== 'default-changed');
      });
      if (!fits) {
        const candidates = [sample(pb), ...typesOf(isPlainObject(pb) ? pb : {}).map((t) => sampleOfType(isPlainObject(pb) ? pb : {}, t))];
        const side = this.#newIsConsumer ? ['old', 'new'] : ['new', 'old'];
        this.#tightened(`${key === 'oneOf' ? 'one-of' : 'any-of'}-${this.#newIsConsumer ? 'narrowed' : 'widened'}`, `${pointer}/${key}`, frames, `${pKey ? `branch ${i} of the ${side[0]} ${pKey}` : `the ${side[0]} schema`} fits no branch of the ${side[1]} ${key}`, candidates);
      }
    });
    if (key === 'oneOf') {
      // Exclusive: a value matching two branches is rejected. Probe producer samples for overlap.
      const candidates = pBranches.flatMap((pb) => [sample(pb), ...typesOf(isPlainObject(pb) ? pb : {}).map((t) => sampleOfType(isPlainObject(pb) ? pb : {}, t))]);
      const witness = this.#confirm(candidates, frames);
      if (witness !== NONE && !this.#findings.some((f) => f.severity === 'breaking' && f.pointer === `${pointer}/oneOf`)) {
        this.#add('one-of-overlap', 'breaking', `${pointer}/oneOf`, frames, 'a value now matches several oneOf branches (or none), so it is rejected', witness);
      }
    }
  }

  /** Safety net: values generated from the producer's schema must all pass the consumer's. */
  #sampleCheck(): void {
    const rng = new Rng(hashSeed(this.#options.seed ?? 0, 'sample-check'));
    for (let i = 0; i < 40; i++) {
      let v: unknown;
      try {
        v = generateSync(this.#producerRoot as never, { seed: rng.int(1, 2 ** 30), optionalsProbability: i % 2 === 0 ? 1 : 0.3 });
      } catch {
        return;
      }
      if (this.#producer(v) && !this.#consumer(v)) {
        this.#add(this.#newIsConsumer ? 'narrowed' : 'widened', 'breaking', '', [], `a value valid under the ${this.#newIsConsumer ? 'old' : 'new'} schema is rejected by the ${this.#newIsConsumer ? 'new' : 'old'} one (found by sampling; no single keyword explains it)`, v);
        return;
      }
    }
  }
}

function bound(s: SchemaObject, inclusiveKey: string, exclusiveKey: string, pick: (a: number, b: number) => number): { v: number; open: boolean } | undefined {
  const inc = typeof s[inclusiveKey] === 'number' ? (s[inclusiveKey] as number) : undefined;
  const exc = typeof s[exclusiveKey] === 'number' ? (s[exclusiveKey] as number) : undefined;
  if (inc === undefined && exc === undefined) return undefined;
  if (inc === undefined) return { v: exc as number, open: true };
  if (exc === undefined) return { v: inc, open: false };
  const v = pick(inc, exc);
  return { v, open: v === exc };
}

function fmtBound(b: { v: number; open: boolean }, dir: '>' | '<'): string {
  return `${dir}${b.open ? '' : '='} ${b.v}`;
}

function fmtTypes(t: string[]): string {
  return t.length === ALL_TYPES.length ? 'any' : t.join('|');
}

/** Is every multiple of `a` a multiple of `b`? (a = k·b for a whole k), tolerant of binary fractions. */
function isMultiple(a: number, b: number): boolean {
  const k = a / b;
  return Math.abs(k - Math.round(k)) < 1e-9;
}

function safeRegExp(source: string): RegExp | undefined {
  try {
    return new RegExp(source, 'u');
  } catch {
    return undefined;
  }
}

function sameSchema(a: unknown, b: unknown): boolean {
  try {
    return deepEqual(stripCycles(a), stripCycles(b));
  } catch {
    return false;
  }
}

/** A finite copy of a possibly cyclic normalized schema (cycles cut to `true`), for local checks. */
function stripCycles<T>(s: T, seen = new Set<object>()): T {
  if (typeof s !== 'object' || s === null) return s;
  if (seen.has(s)) return true as T;
  seen.add(s);
  const out = Array.isArray(s) ? s.map((x) => stripCycles(x, seen)) : Object.fromEntries(Object.entries(s).map(([k, v]) => [k, stripCycles(v, seen)]));
  seen.delete(s);
  return out as T;
}

/** A few keys that match a patternProperties regex. */
function keysMatching(pattern: string): string[] {
  const keys: string[] = [];
  for (let seed = 1; seed <= 3; seed++) {
    try {
      const k = generateSync({ type: 'string', pattern, minLength: 1 }, { seed });
      if (typeof k === 'string' && safeRegExp(pattern)?.test(k)) keys.push(k);
    } catch {
      break;
    }
  }
  return keys;
}

function camelToKebab(s: string): string {
  return s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}
