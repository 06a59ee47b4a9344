/**
 * `agent fuzz` as a library: schema-driven cases against an env, judged by the checks, failures
 * grouped by signature, shrunk, saved under `.agent-fuzz/` and replayed first next time.
 *
 * Cases are a pure function of (seed, index) and the env's definition, so a case id replays it.
 */
import { AgentEnv } from '../env/agent-env.js';
import type { ActionDefinition, EnvDefinition } from '../schema/definition.js';
import { compileSchema } from '../schema/ajv.js';
import { generate } from '../generate/generate.js';
import { boundaries, mutants } from './mutate.js';
import { systemClock, type Clock } from '../shared/clock.js';
import { Emitter } from '../shared/emitter.js';
import { UsageError } from '../shared/errors.js';
import { escapePointerToken, type JsonObject, type JsonValue } from '../shared/json.js';
import { hashSeed, Rng } from '../shared/rng.js';
import { CHECKS, signatureOf, type CheckName, type Failure, type FuzzCase } from './case.js';
import { runCase, type CaseResult } from './run-case.js';
import { shrinkValue } from './shrink.js';
import { loadSaved, removeCase, saveCase } from './store.js';

/** What `Fuzzer` runs: the env, how many cases, the seed, actions and checks, a time budget, the share of invalid cases, tool timeouts and tool options. */
export interface FuzzOptions {
  readonly env: string;
  /** Cases to run (default 500). */
  readonly runs?: number;
  readonly seed?: number;
  /** Only these actions. */
  readonly actions?: readonly string[];
  /** Stop starting new cases after this long. */
  readonly timeBudgetMs?: number;
  /** Share of cases (among enabled ones) with invalid params (default 0.3). */
  readonly invalidRatio?: number;
  /** Checks to run (default all). */
  readonly checks?: readonly CheckName[];
  /** Every tool's timeout is capped at this during fuzzing (default 2000 ms). */
  readonly toolTimeoutMs?: number;
  /** Where failing cases are kept (default `.agent-fuzz`). */
  readonly storeDir?: string;
  /** Time allowed for shrinking each failure (default 5000 ms). */
  readonly shrinkBudgetMs?: number;
  readonly blockThresholdMs?: number;
  /** Passed to the tools module's `createTools` (e.g. `latency_scale` for simulated tools). */
  readonly toolOptions?: Readonly<Record<string, JsonValue>>;
  readonly clock?: Clock;
  /** Skip replaying saved cases (for `--replay` and tests that want a clean slate). */
  readonly replaySaved?: boolean;
  /** Aborts loading (prepare); `run` takes its own signal. */
  readonly signal?: AbortSignal;
}

/** Failures of one check on one action with the same signature: how many, the shrunk case that shows it and the original, and the file it was saved to. */
export interface FailureGroup {
  readonly signature: string;
  readonly check: CheckName;
  readonly action: string;
  readonly code: string;
  readonly message: string;
  readonly count: number;
  /** The shrunk input that still fails the same way. */
  readonly case: FuzzCase;
  readonly original: FuzzCase;
  readonly shrink_steps: number;
  /** Where the case is saved; `agent fuzz <env> --replay <file>` reruns it. */
  readonly file?: string;
  /** True when it failed in a replay of a saved case (it is not fixed yet). */
  readonly replayed: boolean;
}

/** A fuzz run's result: cases run by kind and how fast, the failure groups, saved failures that pass now, and whether it was interrupted. */
export interface FuzzSummary {
  readonly env: string;
  readonly seed: number;
  readonly cases: number;
  readonly duration_ms: number;
  readonly cases_per_second: number;
  readonly by_kind: Readonly<Record<string, number>>;
  readonly generator_misses: number;
  /** Planned cases not run, by action: the generator drew no valid params for them (a schema beyond it). Never silent: the report warns, and a run that ran nothing fails. */
  readonly ungenerated: Readonly<Record<string, number>>;
  readonly failures: readonly FailureGroup[];
  readonly fixed: readonly string[];
  readonly interrupted: boolean;
}

/** What a fuzz run emits while it works: cases started and finished, failures found, and the end. */
export type FuzzEvent =
  | { readonly type: 'started'; readonly env: string; readonly seed: number; readonly runs: number; readonly saved: number }
  | { readonly type: 'case'; readonly case: FuzzCase; readonly failure?: Failure }
  | { readonly type: 'fixed'; readonly signature: string; readonly file: string }
  | { readonly type: 'failure'; readonly group: FailureGroup }
  | { readonly type: 'done'; readonly summary: FuzzSummary };

/** Fuzzes an env's tools: cases generated from its schemas (valid, at the boundaries, mutated) run against every action, each checked, failures grouped with a replay. */
export class Fuzzer {
  readonly events = new Emitter<FuzzEvent>();
  readonly #env: AgentEnv;
  readonly #options: FuzzOptions;
  readonly #clock: Clock;
  readonly #checks: ReadonlySet<CheckName>;
  readonly #actions: readonly ActionDefinition[];
  readonly #states: readonly JsonValue[];
  readonly #seed: number;
  readonly #stateOk: (v: unknown) => boolean;
  readonly #initialCount: number;
  #misses = 0;
  readonly #ungenerated: Record<string, number> = {};

  private constructor(env: AgentEnv, options: FuzzOptions, actions: readonly ActionDefinition[], states: readonly JsonValue[]) {
    this.#env = env;
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#checks = new Set(options.checks ?? CHECKS);
    this.#actions = actions;
    this.#states = states;
    this.#seed = options.seed ?? 0;
    this.#stateOk = compileSchema(env.definition.stateSchema);
    this.#initialCount = env.definition.initialStates.length;
  }

  static async prepare(options: FuzzOptions): Promise<Fuzzer> {
    const runs = options.runs ?? 500;
    if (!Number.isInteger(runs) || runs < 0) throw new UsageError(`runs must be a whole number (got ${runs})`);
    const ratio = options.invalidRatio ?? 0.3;
    if (!(ratio >= 0 && ratio <= 1)) throw new UsageError(`invalid-ratio must be between 0 and 1 (got ${ratio})`);
    for (const c of options.checks ?? []) if (!CHECKS.includes(c)) throw new UsageError(`unknown check '${c}'`, `Checks: ${CHECKS.join(', ')}.`);
    const seed = options.seed ?? 0;
    const env = await AgentEnv.open(options.env, {
      seed,
      ...(options.signal ? { signal: options.signal } : {}),
      maxToolTimeoutMs: options.toolTimeoutMs ?? 2_000,
      ...(options.blockThresholdMs !== undefined ? { blockThresholdMs: options.blockThresholdMs } : {}),
      ...(options.toolOptions ? { toolOptions: options.toolOptions } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
    });
    const def = env.definition;
    const unknown = (options.actions ?? []).filter((a) => !def.actions.has(a));
    if (unknown.length > 0) {
      await env[Symbol.asyncDispose]();
      throw new UsageError(`unknown action${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}`, `Actions of ${def.name}: ${[...def.actions.keys()].join(', ')}.`);
    }
    const actions = [...def.actions.values()].filter((a) => !a.unsatisfiable && (!options.actions || options.actions.includes(a.name)));
    return new Fuzzer(env, options, actions, statesFor(def, seed, runs));
  }

  get definition(): EnvDefinition {
    return this.#env.definition;
  }

  /** The case with this index, as planned from the seed (undefined when no valid params could be generated). */
  plan(index: number): FuzzCase | undefined {
    const rng = new Rng(hashSeed(this.#seed, 'case', index));
    const action = rng.pick(this.#actions);
    // Half the cases start from the env's own initial states: that is where its ids and data make sense.
    const state = this.#initialCount > 0 && rng.next() < 0.5 ? (this.#states[rng.int(0, this.#initialCount - 1)] as JsonValue) : rng.pick(this.#states);
    const id = `${action.name}#${this.#seed}.${index}`;
    const generated = generate(action.parameters, rng, { pool: stringsOf(state) });
    this.#misses += generated.misses;
    if (generated.value === undefined) {
      this.#ungenerated[action.name] = (this.#ungenerated[action.name] ?? 0) + 1;
      return undefined;
    }
    const valid = generated.value as JsonObject;
    const base = { id, seed: this.#seed, index, action: action.name, state };
    if (action.enabledIf && !action.enabledIf.evaluate(state)) return { ...base, kind: 'disabled', params: valid };
    const r = rng.next();
    const ratio = this.#options.invalidRatio ?? 0.3;
    if (r < ratio) {
      const m = mutants(action.parameters, valid, rng, 8);
      const pick = m.length > 0 ? rng.pick(m) : undefined;
      if (pick) return { ...base, kind: 'invalid', params: pick.value as JsonObject, mutation: pick.mutation, pointer: pick.pointer };
    } else if (r < ratio + 0.15) {
      const b = boundaries(action.parameters, valid);
      const pick = b.length > 0 ? rng.pick(b) : undefined;
      if (pick) return { ...base, kind: pick.valid ? 'boundary-inside' : 'boundary-outside', params: pick.value as JsonObject, mutation: pick.mutation, pointer: pick.pointer };
    } else if (r < ratio + 0.35) {
      // State-aware boundaries: a numeric param just around a number of the state (an amount
      // around a balance), where off-by-one comparisons between the two break.
      const near = nearStateValues(action.parameters, valid, numbersOf(state), rng);
      if (near) return { ...base, kind: 'boundary-inside', params: near.params, mutation: 'near-state-value', pointer: near.pointer };
    }
    return { ...base, kind: 'valid', params: valid };
  }

  async #run(c: FuzzCase): Promise<CaseResult> {
    return runCase(this.#env, c, this.#checks, this.#caseTimeoutMs(c.action));
  }

  /**
   * How long a case may take before it counts as outliving its timeout: the tool's timeout plus a
   * second, plus, for a tool an MCP server serves, the server's start-up time, which a call may
   * wait through (a first call, a restart after a crash) and which its timeout does not count.
   */
  #caseTimeoutMs(action: string): number {
    const binding = this.#env.definition.actions.get(action)?.binding;
    const server = binding?.kind === 'mcp' ? this.#env.definition.mcpServers?.get(binding.server) : undefined;
    return (this.#options.toolTimeoutMs ?? 2_000) + 1_000 + (server?.startupTimeoutMs ?? 0);
  }

  /** Run one case (a saved file's, or a planned one) and report its failure, if any. */
  async replay(c: FuzzCase): Promise<Failure | undefined> {
    return (await this.#run(c)).failure;
  }

  async run(signal?: AbortSignal): Promise<FuzzSummary> {
    const started = this.#clock.monotonic();
    const storeDir = this.#options.storeDir ?? '.agent-fuzz';
    const envName = this.#env.definition.name;
    const saved = this.#options.replaySaved === false ? [] : await loadSaved(storeDir, envName);
    const runs = this.#options.runs ?? 500;
    this.events.emit({ type: 'started', env: envName, seed: this.#seed, runs, saved: saved.length });
    const groups = new Map<string, { failure: Failure; cases: FuzzCase[]; replayed: boolean; file?: string }>();
    const fixed: string[] = [];
    const byKind: Record<string, number> = {};
    let cases = 0;

    const record = (c: FuzzCase, failure: Failure, replayed: boolean, file?: string): void => {
      const signature = signatureOf(c.action, failure);
      const g = groups.get(signature);
      if (g) g.cases.push(c);
      else groups.set(signature, { failure, cases: [c], replayed, ...(file ? { file } : {}) });
    };

    // Saved failures first: a fixed bug is shown as fixed.
    for (const { file, saved: s } of saved) {
      if (signal?.aborted) break;
      if (!this.#env.definition.actions.has(s.case.action)) continue;
      const failure = await this.replay(s.case);
      cases++;
      if (failure && signatureOf(s.case.action, failure) === s.signature) record(s.case, failure, true, file);
      else {
        fixed.push(s.signature);
        await removeCase(file);
        this.events.emit({ type: 'fixed', signature: s.signature, file });
      }
    }

    const deadline = this.#options.timeBudgetMs === undefined ? Infinity : started + this.#options.timeBudgetMs;
    for (let i = 0; i < runs && !signal?.aborted && this.#clock.monotonic() < deadline; i++) {
      const c = this.plan(i);
      if (!c) continue;
      cases++;
      byKind[c.kind] = (byKind[c.kind] ?? 0) + 1;
      const first = await this.#run(c);
      let failure = first.failure;
      // Same case, same outcome: re-run the first failure of each signature and a sample of the passes.
      const known = failure !== undefined && groups.has(signatureOf(c.action, failure));
      if (((failure && !known) || (!failure && i % 8 === 0)) && this.#checks.has('deterministic')) {
        const again = await this.#run(c);
        if (again.fingerprint !== first.fingerprint) failure = { check: 'deterministic', code: 'FLAKY', message: `two runs of the same case differ: ${first.fingerprint.slice(0, 80)} vs ${again.fingerprint.slice(0, 80)}` };
      }
      if (failure) record(c, failure, false);
      this.events.emit({ type: 'case', case: c, ...(failure ? { failure } : {}) });
    }

    const failures: FailureGroup[] = [];
    for (const [signature, g] of groups) {
      const original = g.cases.reduce((a, b) => (JSON.stringify(b.params).length < JSON.stringify(a.params).length ? b : a));
      const { shrunk, steps } = g.replayed || g.failure.check === 'deterministic' ? { shrunk: original, steps: 0 } : await this.#shrink(original, signature);
      const file = await saveCase(storeDir, envName, { signature, failure: g.failure, case: shrunk, original, first_seen: new Date(this.#clock.now()).toISOString() });
      const group: FailureGroup = { signature, check: g.failure.check, action: shrunk.action, code: g.failure.code, message: g.failure.message, count: g.cases.length, case: shrunk, original, shrink_steps: steps, file, replayed: g.replayed };
      failures.push(group);
      this.events.emit({ type: 'failure', group });
    }

    const durationMs = this.#clock.monotonic() - started;
    const summary: FuzzSummary = {
      env: envName,
      seed: this.#seed,
      cases,
      duration_ms: durationMs,
      cases_per_second: cases / Math.max(durationMs / 1000, 1e-3),
      by_kind: byKind,
      generator_misses: this.#misses,
      ungenerated: { ...this.#ungenerated },
      failures,
      fixed,
      interrupted: signal?.aborted === true,
    };
    this.events.emit({ type: 'done', summary });
    return summary;
  }

  /** Shrink params, then state, keeping the case's kind and its failure signature. */
  async #shrink(c: FuzzCase, signature: string): Promise<{ shrunk: FuzzCase; steps: number }> {
    const action = this.#env.definition.actions.get(c.action) as ActionDefinition;
    const paramsOk = compileSchema(action.parameters);
    const deadline = this.#clock.monotonic() + (this.#options.shrinkBudgetMs ?? 5_000);
    const enabled = (state: JsonValue): boolean => !action.enabledIf || action.enabledIf.evaluate(state);
    const sameKind = (params: JsonValue, state: JsonValue): boolean => {
      if (!this.#stateOk(state)) return false;
      if (c.kind === 'disabled') return paramsOk(params) && !enabled(state);
      if (!enabled(state)) return false;
      return c.kind === 'invalid' || c.kind === 'boundary-outside' ? !paramsOk(params) : paramsOk(params);
    };
    const fails = async (candidate: FuzzCase): Promise<boolean> => {
      const f = (await this.#run(candidate)).failure;
      return f !== undefined && signatureOf(candidate.action, f) === signature;
    };
    const now = (): number => this.#clock.monotonic();
    const p = await shrinkValue(c.params, (v) => sameKind(v, c.state), (v) => fails({ ...c, params: v as JsonObject }), deadline, now);
    const s = await shrinkValue(c.state, (v) => sameKind(p.value, v), (v) => fails({ ...c, params: p.value as JsonObject, state: v }), deadline, now);
    // An invalid case's pointer may have moved with shrinking; the first error's pointer is what it is now.
    return { shrunk: { ...c, params: p.value as JsonObject, state: s.value }, steps: p.steps + s.steps };
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.#env[Symbol.asyncDispose]();
  }
}

/** The finite numbers of a state (at most 200). */
function numbersOf(state: JsonValue): number[] {
  const out: number[] = [];
  const walk = (v: unknown, depth: number): void => {
    if (out.length >= 200 || depth > 12) return;
    if (typeof v === 'number' && Number.isFinite(v)) out.push(v);
    else if (Array.isArray(v)) for (const x of v) walk(x, depth + 1);
    else if (v !== null && typeof v === 'object') for (const x of Object.values(v)) walk(x, depth + 1);
  };
  walk(state, 0);
  return out;
}

/** Valid params with one top-level numeric param moved just around a number of the state, if the schema admits one. */
function nearStateValues(schema: ActionDefinition['parameters'], valid: JsonObject, numbers: readonly number[], rng: Rng): { params: JsonObject; pointer: string } | undefined {
  const keys = Object.keys(valid).filter((k) => typeof valid[k] === 'number');
  if (keys.length === 0 || numbers.length === 0) return undefined;
  const check = compileSchema(schema);
  const key = rng.pick(keys);
  const n = rng.pick(numbers);
  const deltas = Number.isInteger(valid[key]) ? [0, 1, -1, 2] : [0, 0.5, 1, -0.5, 1.5, 0.001];
  const start = rng.int(0, deltas.length - 1);
  for (let i = 0; i < deltas.length; i++) {
    const d = deltas[(start + i) % deltas.length] as number;
    const value = Number.isInteger(valid[key]) ? Math.round(n) + d : Math.round((n + d) * 1000) / 1000;
    const params = { ...valid, [key]: value };
    if (check(params)) return { params, pointer: `/${escapePointerToken(key)}` };
  }
  return undefined;
}

/** Strings found in a state, by the property name they sit under (map keys count under the map's name too). */
function stringsOf(state: JsonValue): { byName: Map<string, string[]>; all: string[] } {
  const byName = new Map<string, Set<string>>();
  const all = new Set<string>();
  const note = (name: string | undefined, v: string): void => {
    all.add(v);
    if (name !== undefined) {
      let set = byName.get(name);
      if (!set) byName.set(name, (set = new Set()));
      if (set.size < 200) set.add(v);
    }
  };
  const walk = (v: unknown, name: string | undefined, depth: number): void => {
    if (depth > 12) return;
    if (typeof v === 'string') note(name, v);
    else if (Array.isArray(v)) v.forEach((x) => walk(x, name, depth + 1));
    else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        // In {users: {"mia_li_3668": {...}}}, the key is a user id: note it under the item's own id field too.
        if (x !== null && typeof x === 'object' && !Array.isArray(x)) for (const [ik, iv] of Object.entries(x)) if (iv === k) note(ik, k);
        walk(x, k, depth + 1);
      }
    }
  };
  walk(state, undefined, 0);
  return { byName: new Map([...byName].map(([k, v]) => [k, [...v]])), all: [...all].slice(0, 400) };
}

/**
 * The states cases start from: the env's initial states, and states generated from its state
 * schema — more of them the larger the budget (one per 20 cases, 24 to 2,000), so a longer run
 * reaches states a short one does not — a third of them at the schema's bounds (a balance at its
 * maximum, a list at its longest), where a state-dependent bug (a deposit that breaks `maximum`
 * only above 900) lives.
 */
function statesFor(def: EnvDefinition, seed: number, runs: number): JsonValue[] {
  const rng = new Rng(hashSeed(seed, 'states'));
  const states: JsonValue[] = [...def.initialStates];
  const count = Math.min(2_000, Math.max(24, Math.ceil(runs / 20)));
  for (let i = 0; states.length < def.initialStates.length + count && i < count * 2; i++) {
    const v = generate(def.stateSchema, rng, { maxDepth: 3 }).value;
    if (v === undefined) continue;
    if (rng.next() < 1 / 3) {
      const atBounds = boundaries(def.stateSchema, v).filter((b) => b.valid);
      states.push(atBounds.length > 0 ? rng.pick(atBounds).value : v);
    } else states.push(v);
  }
  if (states.length === 0) throw new UsageError(`env '${def.name}' has no initial states and none could be generated from its state schema`, 'Add initial_states.json to the env folder.');
  return states;
}
