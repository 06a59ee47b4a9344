/**
 * schema-diff: who breaks when an env's schemas change.
 * - Actions are produced by policies and consumed by the env: a change breaks when a value valid
 *   under the old schema is invalid under the new one (tightening breaks; Confluent's BACKWARD).
 * - State and rewards are produced by the env and consumed by policies and trainers: a change
 *   breaks when a value valid under the new schema is invalid under the old one (loosening breaks; FORWARD).
 * - `full` checks both directions; `backward`/`forward` force one direction for every kind.
 */
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import { compileSchema, type JsonSchema } from '../schema/ajv.js';
import { parseActionDocument } from '../schema/actions.js';
import type { ActionDefinition, EnvDefinition, RewardSourceDefinition } from '../schema/definition.js';
import { loadEnvDefinition } from '../schema/load-env.js';
import { listMcpTools } from '../tools/mcp/list-tools.js';
import { parseRewardDocument } from '../schema/rewards.js';
import { generate } from '../generate/generate.js';
import { AgentError, UsageError, ValidationError } from '../shared/errors.js';
import { escapePointerToken, type JsonValue } from '../shared/json.js';
import { hashSeed, Rng } from '../shared/rng.js';
import { compareSchemas, type RawFinding, type Severity } from './compare.js';
import { deepEqual } from '../state/patch.js';

/** Which of an env's schemas a finding is about: its state, an action's parameters, or a reward source. */
export type DiffKind = 'state' | 'action' | 'reward';
/** Which direction a change must stay compatible in: `default` (actions backward, state and rewards forward), `backward` or `forward` for every kind, or `full` (both). */
export type DiffMode = 'default' | 'backward' | 'forward' | 'full';

/** One schema change between two env versions: its rule, severity, where it is (schema kind, action, JSON pointer) and what changed. */
export interface Finding {
  readonly rule: string;
  readonly severity: Severity;
  readonly kind: DiffKind;
  /** The action or reward source concerned. */
  readonly subject?: string;
  /** Where in the env: `/state…`, `/actions/<name>…`, `/rewards/<source>…` followed by the pointer inside that schema. */
  readonly location: string;
  /** JSON pointer inside the schema. */
  readonly pointer: string;
  /** Where the difference bites in a payload (`*` = any item or key). */
  readonly instance_path: string;
  /** The file that declares it, when known. */
  readonly file?: string;
  /** Who breaks and why, in one sentence. */
  readonly message: string;
  /** A concrete whole payload valid on one side and invalid on the other, checked with ajv. */
  readonly witness?: unknown;
  /** Which side accepts the witness (the other rejects it). */
  readonly witness_valid_in?: 'old' | 'new';
}

export interface DiffOptions {
  readonly mode?: DiffMode;
  readonly tolerant?: boolean;
  readonly seed?: number;
  /** Aborts reading the definitions. */
  readonly signal?: AbortSignal;
}

type Side = 'old' | 'new';

function directions(kind: DiffKind, mode: DiffMode): Side[] {
  // The side listed is the producer's: its values must pass the other side.
  if (mode === 'backward') return ['old'];
  if (mode === 'forward') return ['new'];
  if (mode === 'full') return ['old', 'new'];
  return kind === 'action' ? ['old'] : ['new'];
}

function whoBreaks(kind: DiffKind, producer: Side): string {
  if (producer === 'old') {
    return kind === 'action'
      ? 'a call that existing policies can make is now rejected by the env'
      : `a ${kind} valid under the old schema is rejected by the new one (stored trajectories no longer validate)`;
  }
  return kind === 'action'
    ? 'the new schema admits calls the old one rejected (policies or tools built on the old schema may not expect them)'
    : `the env can now produce a ${kind} that policies and trainers built on the old schema reject`;
}

/** Compare two schemas of one kind. */
export function diffSchema(oldSchema: JsonSchema, newSchema: JsonSchema, kind: DiffKind, options: DiffOptions & { subject?: string; base?: string; file?: string } = {}): Finding[] {
  const mode = options.mode ?? 'default';
  const out: Finding[] = [];
  for (const producer of directions(kind, mode)) {
    const [p, c] = producer === 'old' ? [oldSchema, newSchema] : [newSchema, oldSchema];
    for (const raw of compareSchemas(p, c, { producer, ...(options.tolerant ? { tolerant: true } : {}), seed: options.seed ?? 0 })) out.push(toFinding(raw, kind, producer, options));
  }
  if (mode === 'full') {
    // A loosening reported as info in one direction is the breaking finding of the other.
    const breaking = new Set(out.filter((f) => f.severity === 'breaking').map((f) => f.location));
    return out.filter((f) => f.severity !== 'info' || !breaking.has(f.location));
  }
  return out;
}

function toFinding(raw: RawFinding, kind: DiffKind, producer: Side, options: { subject?: string; base?: string; file?: string }): Finding {
  const base = options.base ?? (kind === 'state' ? '/state' : kind === 'action' ? `/actions/${escapePointerToken(options.subject ?? '')}` : `/rewards/${escapePointerToken(options.subject ?? '')}`);
  const consumer: Side = producer === 'old' ? 'new' : 'old';
  const message =
    raw.severity === 'breaking'
      ? `${raw.change}: ${whoBreaks(kind, producer)}.`
      : raw.severity === 'warning'
        ? `${raw.change}.`
        : `${raw.change} (compatible in this direction: the ${consumer} side accepts more).`;
  return {
    rule: raw.rule,
    severity: raw.severity,
    kind,
    ...(options.subject !== undefined ? { subject: options.subject } : {}),
    location: `${base}${raw.pointer}`,
    pointer: raw.pointer,
    instance_path: raw.instancePath,
    ...(options.file ? { file: options.file } : {}),
    message,
    ...(raw.witness !== undefined ? { witness: raw.witness, witness_valid_in: producer } : {}),
  };
}

/** Compare two loaded env definitions: state, every action (and its enabled_if), every reward source. */
export function diffDefinitions(oldDef: EnvDefinition, newDef: EnvDefinition, options: DiffOptions = {}): Finding[] {
  const findings: Finding[] = [];
  const rel = (f: string): string => path.relative(process.cwd(), f) || f;
  findings.push(...diffSchema(oldDef.stateSchema, newDef.stateSchema, 'state', { ...options }));
  findings.push(...diffActions(oldDef.actions, newDef.actions, options, rel));
  findings.push(...diffConditions(oldDef, newDef, options));
  findings.push(...diffRewards(oldDef.rewards, newDef.rewards, options));
  return findings;
}

function diffActions(oldActions: ReadonlyMap<string, Pick<ActionDefinition, 'name' | 'parameters' | 'source'>>, newActions: ReadonlyMap<string, Pick<ActionDefinition, 'name' | 'parameters' | 'source'>>, options: DiffOptions, rel: (f: string) => string): Finding[] {
  const findings: Finding[] = [];
  for (const [name, oldA] of oldActions) {
    const newA = newActions.get(name);
    const location = `/actions/${escapePointerToken(name)}`;
    if (!newA) {
      const params = generate(oldA.parameters, new Rng(hashSeed(options.seed ?? 0, name))).value ?? {};
      findings.push({
        rule: 'action-removed',
        severity: 'breaking',
        kind: 'action',
        subject: name,
        location,
        pointer: '',
        instance_path: '',
        file: rel(oldA.source.file),
        message: `action '${name}' was removed: every policy that calls it now gets ACTION_UNKNOWN.`,
        witness: { name, params },
        witness_valid_in: 'old',
      });
      continue;
    }
    findings.push(...diffSchema(oldA.parameters, newA.parameters, 'action', { ...options, subject: name, file: rel(newA.source.file) }));
  }
  for (const [name, newA] of newActions) {
    if (!oldActions.has(name)) {
      findings.push({ rule: 'action-added', severity: 'info', kind: 'action', subject: name, location: `/actions/${escapePointerToken(name)}`, pointer: '', instance_path: '', file: rel(newA.source.file), message: `action '${name}' was added.` });
    }
  }
  return findings;
}

/** An enabled_if breaks a policy when some state the env can produce enabled the action before and disables it now. */
function diffConditions(oldDef: EnvDefinition, newDef: EnvDefinition, options: DiffOptions): Finding[] {
  const findings: Finding[] = [];
  const stateOk = compileSchema(newDef.stateSchema);
  let states: JsonValue[] | undefined;
  const candidateStates = (): JsonValue[] => {
    if (states) return states;
    const rng = new Rng(hashSeed(options.seed ?? 0, 'states'));
    states = [...oldDef.initialStates, ...newDef.initialStates];
    for (let i = 0; i < 30; i++) {
      const v = generate(newDef.stateSchema, rng).value;
      if (v !== undefined) states.push(v);
      const o = generate(oldDef.stateSchema, rng).value;
      if (o !== undefined) states.push(o);
    }
    return states;
  };
  for (const [name, newA] of newDef.actions) {
    const oldA = oldDef.actions.get(name);
    if (!oldA) continue;
    const before = oldA.enabledIf;
    const after = newA.enabledIf;
    const location = `/actions/${escapePointerToken(name)}/enabled_if`;
    if (!after) {
      if (before) findings.push({ rule: 'enabled-if-removed', severity: 'info', kind: 'action', subject: name, location, pointer: '/enabled_if', instance_path: '', message: `enabled_if ${JSON.stringify(before.source)} removed: '${name}' is always enabled.` });
      continue;
    }
    const dangling = after.paths.filter((p) => !declared(newDef.stateSchema, p) && declared(oldDef.stateSchema, p));
    if (before?.source === after.source && dangling.length === 0) continue;
    if (dangling.length > 0) {
      // The env no longer maintains a field the condition reads: in a new state without it, the action is off.
      const witness = candidateStates()
        .map((s) => dangling.reduce((acc, p) => withPath(acc, p, null), s))
        .find((s) => stateOk(s) && !after.evaluate(s) && (before ? candidateStates().some((o) => before.evaluate(o)) : true));
      const fields = dangling.map((p) => p.join('.')).join(', ');
      if (witness !== undefined) {
        findings.push({ rule: 'enabled-if-dangling', severity: 'breaking', kind: 'action', subject: name, location, pointer: '/enabled_if', instance_path: '', message: `enabled_if ${JSON.stringify(after.source)} reads ${fields}, which the new state schema no longer declares: in this state (valid under the new schema) '${name}' is disabled, so policies that relied on it are refused.`, witness, witness_valid_in: 'new' });
        continue;
      }
    }
    // Variants that drop each path the new condition reads expose conditions on removed fields.
    const variants = candidateStates().flatMap((s) => [s, ...after.paths.map((p) => withPath(s, p, null))]);
    const witness = variants.find((s) => stateOk(s) && (before ? before.evaluate(s) : true) && !after.evaluate(s));
    const change = `enabled_if ${before ? JSON.stringify(before.source) : 'none'} → ${JSON.stringify(after.source)}`;
    if (witness !== undefined) {
      findings.push({ rule: 'enabled-if-narrowed', severity: 'breaking', kind: 'action', subject: name, location, pointer: '/enabled_if', instance_path: '', message: `${change}: in this state '${name}' was enabled and is now disabled, so a policy's call is refused.`, witness, witness_valid_in: 'old' });
    } else {
      findings.push({ rule: 'enabled-if-changed', severity: 'warning', kind: 'action', subject: name, location, pointer: '/enabled_if', instance_path: '', message: `${change}: no state was found where it disables '${name}' that was enabled before; check by hand.` });
    }
  }
  return findings;
}

function diffRewards(oldR: ReadonlyMap<string, RewardSourceDefinition>, newR: ReadonlyMap<string, RewardSourceDefinition>, options: DiffOptions): Finding[] {
  const findings: Finding[] = [];
  for (const [name, o] of oldR) {
    const n = newR.get(name);
    const location = `/rewards/${escapePointerToken(name)}`;
    if (!n) {
      const value = generate(o.schema, new Rng(hashSeed(options.seed ?? 0, name))).value ?? 0;
      findings.push({ rule: 'reward-source-removed', severity: 'breaking', kind: 'reward', subject: name, location, pointer: '', instance_path: '', message: `reward source '${name}' was removed: trainers that read it get nothing, and a tool reporting it now fails its trace.`, witness: { [name]: value }, witness_valid_in: 'old' });
      continue;
    }
    findings.push(...diffSchema(o.schema, n.schema, 'reward', { ...options, subject: name }));
    const contract = (key: string, a: unknown, b: unknown, why: string): void => {
      if (!deepEqual(a, b)) findings.push({ rule: `reward-${key.replace(/_/g, '-')}-changed`, severity: 'warning', kind: 'reward', subject: name, location: `${location}/${key}`, pointer: `/${key}`, instance_path: '', message: `${key} of '${name}' changed from ${JSON.stringify(a ?? null)} to ${JSON.stringify(b ?? null)}: ${why}.` });
    };
    contract('delay_ms', o.delayMs, n.delayMs, 'trainers that wait for this source must adjust their alignment window');
    contract('aggregation', o.aggregation, n.aggregation, 'the same rewards now add up to a different return');
    contract('deadline_ms', o.deadlineMs, n.deadlineMs, 'rewards are now imputed at a different time');
    contract('fallback', o.fallback, n.fallback, 'imputed rewards now take a different value');
    contract('weight', o.weight, n.weight, "the step's scalar reward now weighs this source differently");
  }
  for (const name of newR.keys()) {
    if (!oldR.has(name)) findings.push({ rule: 'reward-source-added', severity: 'info', kind: 'reward', subject: name, location: `/rewards/${escapePointerToken(name)}`, pointer: '', instance_path: '', message: `reward source '${name}' was added.` });
  }
  return findings;
}

function withPath(state: JsonValue, tokens: readonly string[], value: JsonValue): JsonValue {
  if (tokens.length === 0) return value;
  const [head, ...rest] = tokens as [string, ...string[]];
  const obj = typeof state === 'object' && state !== null && !Array.isArray(state) ? state : {};
  if (rest.length === 0) {
    const { [head]: _gone, ...without } = obj;
    return value === null ? without : { ...obj, [head]: value };
  }
  return { ...obj, [head]: withPath((obj as Record<string, JsonValue>)[head] ?? {}, rest, value) };
}

function declared(schema: JsonSchema, tokens: readonly string[]): boolean {
  let node: unknown = schema;
  for (const t of tokens) {
    const props = typeof node === 'object' && node !== null ? (node as { properties?: Record<string, unknown> }).properties : undefined;
    if (!props || !Object.hasOwn(props, t)) return t === 'length';
    node = props[t];
  }
  return true;
}

/** Load two env folders and diff them. Definitions that do not load are the user's input errors (exit 2). */
export async function diffEnvFolders(oldDir: string, newDir: string, options: DiffOptions = {}): Promise<Finding[]> {
  const load = { checkConditionPaths: false, listMcpTools, ...(options.signal ? { signal: options.signal } : {}) };
  const [oldDef, newDef] = await Promise.all([loadEnvDefinition(oldDir, load), loadEnvDefinition(newDir, load)]);
  return diffDefinitions(oldDef, newDef, options);
}

const KIND_BY_NAME: Readonly<Record<string, DiffKind>> = { 'state_schema.json': 'state', 'action_schema.json': 'action', 'reward_schema.json': 'reward' };

/** Diff two schema files. The kind comes from `kind`, else from the file name (state_schema.json, action_schema.json, reward_schema.json, *tools*.json). */
export async function diffSchemaFiles(oldFile: string, newFile: string, options: DiffOptions & { kind?: DiffKind } = {}): Promise<Finding[]> {
  const kind = options.kind ?? KIND_BY_NAME[path.basename(newFile)] ?? (/tools?\b.*\.json$/i.test(path.basename(newFile)) ? 'action' : undefined);
  if (!kind) throw new UsageError(`cannot tell what kind of schema '${newFile}' is`, 'Pass --kind state|action|reward, or name the files state_schema.json, action_schema.json or reward_schema.json.');
  const [oldDoc, newDoc] = await Promise.all([readSchema(oldFile), readSchema(newFile)]);
  if (kind === 'state') return diffSchema(oldDoc as JsonSchema, newDoc as JsonSchema, 'state', { ...options, file: newFile });
  if (kind === 'reward') {
    const [o, n] = [parseRewardDocument(oldDoc, oldFile), parseRewardDocument(newDoc, newFile)];
    const issues = [...o.issues, ...n.issues];
    if (issues.length > 0) throw new ValidationError('DEFINITION_INVALID', 'reward schemas are invalid', issues, 'Fix the listed fields.');
    return diffRewards(new Map(o.sources.map((s) => [s.name, s])), new Map(n.sources.map((s) => [s.name, s])), options);
  }
  const [o, n] = [parseActionDocument(oldDoc, { file: oldFile }), parseActionDocument(newDoc, { file: newFile })];
  const issues = [...o.issues, ...n.issues];
  if (issues.length > 0) throw new ValidationError('DEFINITION_INVALID', 'action schemas are invalid', issues, 'Fix the listed fields.');
  const rel = (f: string): string => path.relative(process.cwd(), f) || f;
  return diffActions(new Map(o.actions.map((a) => [a.name, a])), new Map(n.actions.map((a) => [a.name, a])), options, rel);
}

async function readSchema(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new AgentError('DEFINITION_NOT_FOUND', `cannot read '${file}': ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { hint: 'Pass two env folders or two schema files.' });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ValidationError('DEFINITION_INVALID', `'${file}' is not JSON`, [{ file, pointer: '', message: (err as Error).message }], 'Fix the JSON syntax.');
  }
}
