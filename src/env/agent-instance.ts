/**
 * One agent in one environment. `dispatch` validates and starts a tool call and returns its
 * trace id at once; `resolve` waits (bounded by `timeoutMs`) for the result; `step` is both.
 * Several calls may be in flight; their state changes commit in completion order, each patch
 * applied to the then-current state and validated against the state schema before it is
 * written. A call whose result is invalid fails its own trace and writes nothing.
 *
 * Over 500 lines on purpose: dispatch, settle, commit and restore share the instance's in-flight
 * map and commit order; they are one state machine and are read together.
 */
import type { EpisodeSandbox } from '../tools/types.js';
import { assertTransition, type LifecycleStatus } from '../lifecycle/lifecycle.js';
import { stepRewards, type StepRewards } from '../reward/step-rewards.js';
import { validate } from '../schema/ajv.js';
import { linkedController, raceAbort, type LinkedController } from '../shared/abort.js';
import { AgentError, ToolError, ValidationError, type AgentError as AgentErrorType, describeError } from '../shared/errors.js';
import { withoutStack } from '../shared/without-stack.js';
import { isPlainObject, type JsonObject, type JsonValue } from '../shared/json.js';
import { applyFrozenPatch } from '../state/patch.js';
import type { Snapshot, StatePoint } from '../state/store.js';
import type { ToolCallOutcome } from '../tools/router.js';
import type { ToolResult } from '../tools/types.js';
import type { RestoredStep } from '../reward/evaluators.js';
import type { EnvEvent, RewardEntry } from '../events/env-events.js';
import type { EnvRuntime } from './runtime.js';
import type { Action, Actor, AvailableAction, InstanceHooks, PendingTrace, ResolveOptions, StepInfo, StepResult } from './instance-types.js';
import { refuseWrongActor } from './actors.js';
import { asAgentError, copyOrRefuse, errorInfo, isPromise, Trace, TraceTable, withValues, type Committed, type Lane } from './trace.js';

/** A record being built: its optional fields set after the literal (a spread of `{}` per step is garbage). */
type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export type { Action, Actor, AvailableAction, InstanceHooks, PendingTrace, ResolveOptions, StepInfo, StepResult } from './instance-types.js';
export { errorInfo } from './trace.js';

/** One episode's env: its state, the actions enabled in it, and the async core: `dispatch` calls without waiting, `resolve` them as they settle (or `step` to do both), time travel with `stateAt`. */
export class AgentInstance {
  readonly id: string;
  readonly #rt: EnvRuntime;
  readonly #hooks: InstanceHooks;
  #status: LifecycleStatus = 'created';
  #state: JsonValue = null;
  #seq = 0;
  #episode = 0;
  #generation = 0;
  /** Steps settled in the current episode. */
  #steps = 0;
  #done = false;
  #nextTrace = 0;
  readonly #traces = new TraceTable();
  /**
   * Commits are serialized so that the store sees them in completion order: `#commits` is the
   * tail of the chain, `#queued` the commits on it. With none queued and a store that appends at
   * once (memory), a commit runs synchronously (see #serialized).
   */
  #commits: Promise<unknown> = Promise.resolve();
  #queued = 0;
  /** One controller per episode (not per call): reset and terminate abort the calls of the episode. */
  #episodeAbort: LinkedController | undefined;
  /** Controllers of the episode's attempts in flight, aborted with the episode (see tools/policy.ts). */
  readonly #live = new Set<AbortController>();
  readonly #hasHooks: boolean;
  readonly #lane: Lane = { take: (trace, outcome) => this.#take(trace, outcome) };

  /** @internal Created by {@link AgentEnv.createInstance}. */
  constructor(id: string, runtime: EnvRuntime, hooks: InstanceHooks = {}) {
    this.id = id;
    this.#rt = runtime;
    this.#hooks = hooks;
    this.#hasHooks = Object.values(hooks).some((h) => h !== undefined);
  }

  /** Events are built only when someone listens: a trainer driving the core directly pays nothing for them. */
  get #observed(): boolean {
    return this.#hasHooks || this.#rt.events.hasListeners;
  }

  /**
   * The episode's sandbox, in an env that declares one (env.json `sandbox`): for code that drives
   * the episode from outside, as an agent program's runner does. Its workspace is the one the
   * env's sandbox tools use this episode.
   */
  get sandbox(): EpisodeSandbox | undefined {
    return this.#rt.router.instanceSandbox(this.id, () => this.#state);
  }

  get status(): LifecycleStatus {
    return this.#status;
  }

  /** The current (committed) state. Frozen. */
  get state(): JsonValue {
    return this.#state;
  }

  get seq(): number {
    return this.#seq;
  }

  /** Calls dispatched by this instance so far: the next trace id is `<id>:<traces + 1>`. */
  get traces(): number {
    return this.#nextTrace;
  }

  /** The current episode's number: 1 after the first reset, +1 per reset, or what `reset` was given. */
  get episode(): number {
    return this.#episode;
  }

  /** True once a tool returned `done: true` in this episode. */
  get done(): boolean {
    return this.#done;
  }

  /** Calls dispatched and not yet finished, oldest first. */
  pending(): PendingTrace[] {
    const out: PendingTrace[] = [];
    for (const t of this.#traces.values()) if (!t.final && !t.broken) out.push({ traceId: t.traceId, action: t.action.name, startedAt: t.startedAt });
    return out;
  }

  /**
   * Start a new episode from `initialState` (validated against the state schema; nothing is
   * written if it is invalid). Calls still in flight from the previous episode are cancelled, and
   * the previous episode's traces are forgotten: resolve a trace before resetting if you need it.
   */
  async reset(initialState: JsonValue, options: { signal?: AbortSignal; episode?: number } = {}): Promise<{ state: JsonValue; actions: AvailableAction[] }> {
    assertTransition(this.id, this.#status, 'initialized');
    const label = options.episode ?? this.#episode + 1;
    if (!Number.isInteger(label) || label < 0) throw new AgentError('BAD_USAGE', `episode must be a whole number ≥ 0 (got ${String(options.episode)})`, { hint: 'Number episodes 0, 1, 2, … or leave it out.' });
    const state = copyOrRefuse(initialState, 'STATE_INVALID', `initial state of instance '${this.id}'`);
    const issues = this.#rt.stateValidator.validate(state);
    if (issues.length > 0) throw new ValidationError('STATE_INVALID', `initial state of instance '${this.id}' does not match the state schema`, issues, 'Fix the listed fields of the initial state.');
    this.#cancelAll(() => new AgentError('TOOL_CANCELLED', 'the episode was reset'));
    this.#traces.clear();
    // A new episode starts with a new workspace (only envs with a sandbox have one).
    if (this.#rt.router.sandbox) await this.#rt.router.resetInstance(this.id);
    if (this.#generation > 0 && this.#rt.rewards.active) this.#rt.rewards.episodeEnded(this.id, this.#episode);
    const now = this.#rt.clock.now();
    await this.#serialized(async () => {
      if (this.#generation === 0) await this.#rt.store.init(this.id, state, now, options.signal);
      else this.#seq = await this.#rt.store.append(this.id, { patch: [{ op: 'replace', path: '', value: state }], time: now, trace_id: 'reset' }, state, options.signal);
    });
    this.#state = state;
    this.#episode = label;
    this.#generation += 1;
    this.#steps = 0;
    this.#done = false;
    if (this.#rt.rewards.active) this.#rt.rewards.episodeStarted(this.id, label, state);
    this.#episodeAbort = linkedController(this.#rt.signal);
    this.#transition('initialized');
    return { state, actions: this.availableActions() };
  }

  /**
   * Continue an episode whose history is in the store already (a run resumed after a crash): the
   * state is the store's at `seq`; step numbers and trace ids go on after `steps` and `traces`.
   * Nothing is written. `trajectory` (the steps taken before, oldest first) and `initial` let
   * episode-scoped reward sources judge the whole episode.
   */
  async restore(
    point: { readonly episode: number; readonly seq: number; readonly steps: number; readonly traces: number; readonly initial: JsonValue; readonly trajectory?: readonly RestoredStep[] },
    options: { signal?: AbortSignal } = {},
  ): Promise<{ state: JsonValue; actions: AvailableAction[] }> {
    assertTransition(this.id, this.#status, 'initialized');
    const { state } = await this.#rt.store.stateAt(this.id, { seq: point.seq }, options.signal);
    const issues = this.#rt.stateValidator.validate(state);
    if (issues.length > 0) {
      const first = issues[0];
      throw new AgentError('STATE_CORRUPT', `the stored state of instance '${this.id}' at seq ${point.seq} does not match the state schema (${first?.pointer || '/'}: ${first?.message ?? ''})`, {
        hint: 'The store holds a state this env would never commit: restore it from a backup, or start the episode again.',
      });
    }
    this.#state = state;
    this.#seq = point.seq;
    this.#episode = point.episode;
    this.#generation += 1;
    this.#steps = point.steps;
    this.#nextTrace = point.traces;
    this.#done = false;
    if (this.#rt.rewards.active) this.#rt.rewards.episodeRestored(this.id, point.episode, point.initial, point.trajectory ?? [], state);
    this.#episodeAbort = linkedController(this.#rt.signal);
    this.#transition('initialized');
    return { state, actions: this.availableActions() };
  }

  /** The actions enabled now (`enabled_if`, satisfiable params): the agent's, or with `'user'` the other side's (`"actor": "user"`). */
  availableActions(actor: Actor = 'agent'): AvailableAction[] {
    const out: AvailableAction[] = [];
    for (const a of this.#rt.definition.actions.values()) {
      if ((a.actor ?? 'agent') !== actor || a.unsatisfiable || (a.enabledIf && !a.enabledIf.evaluate(this.#state))) continue;
      out.push({ name: a.name, ...(a.description !== undefined ? { description: a.description } : {}), parameters: a.parameters });
    }
    return out;
  }

  /**
   * Validate the action and start its tool call; returns the trace id without waiting.
   * Throws (and writes nothing) when the action is unknown, disabled or its params are invalid.
   */
  dispatch(action: Action): string {
    if (this.#status !== 'initialized' && this.#status !== 'running') {
      throw new AgentError('ILLEGAL_TRANSITION', `instance '${this.id}' is ${this.#status}: it cannot dispatch`, {
        hint: this.#status === 'paused' ? 'Call resume() first.' : this.#status === 'created' ? 'Call reset(initialState) first.' : 'This instance is finished; create a new one.',
      });
    }
    if (this.#done) throw new AgentError('EPISODE_DONE', `instance '${this.id}': episode ${this.#episode} is done`, { hint: 'Call reset() to start a new episode.' });
    const def = this.#rt.definition.actions.get(action.name);
    if (!def) {
      const names = [...this.#rt.definition.actions.keys()];
      throw new AgentError('ACTION_UNKNOWN', `unknown action '${action.name}'`, { hint: `Known actions: ${names.slice(0, 12).join(', ')}${names.length > 12 ? ', …' : ''}.` });
    }
    refuseWrongActor(def, action);
    if (def.unsatisfiable) throw new AgentError('ACTION_UNSATISFIABLE', `action '${def.name}' can never be called: ${def.unsatisfiable.reason}`, { hint: `Fix its parameter schema at ${def.unsatisfiable.pointer}.` });
    if (def.enabledIf && !def.enabledIf.evaluate(this.#state)) {
      throw new AgentError('ACTION_DISABLED', `action '${def.name}' is disabled in the current state (enabled_if: ${def.enabledIf.source})`, {
        hint: 'Choose among availableActions().',
      });
    }
    // Copied first, so that what is validated is exactly what the tool will see (no getter can
    // answer twice, no "__proto__" key can become a prototype) and nothing the caller keeps can change it.
    const params = copyOrRefuse(action.params ?? {}, 'PARAMS_INVALID', `params of '${def.name}'`);
    if (!isPlainObject(params)) throw new ValidationError('PARAMS_INVALID', `params of '${def.name}' must be an object`, [{ pointer: '', message: 'must be object' }], 'Pass params as an object.');
    const issues = validate(def.parameters, params);
    if (issues.length > 0) throw new ValidationError('PARAMS_INVALID', `params of '${def.name}' do not match its schema`, withValues(issues, params), 'Fix the listed params; nothing was dispatched.');

    const abort = this.#episodeAbort;
    if (!abort) throw new AgentError('ILLEGAL_TRANSITION', `instance '${this.id}' is being reset`, { hint: 'Await reset() before dispatching.' });
    const traceId = `${this.id}:${++this.#nextTrace}`;
    if (this.#status === 'initialized') this.#transition('running');
    const frozen = params as JsonObject;
    const startedAt = this.#rt.clock.monotonic();
    const episode = this.#episode;
    if (this.#observed) {
      const time = this.#rt.clock.now();
      this.#emit({ type: 'dispatched', time, instance_id: this.id, trace_id: traceId, action: def.name, episode, params: frozen });
      this.#emit({ type: 'tool_started', time, instance_id: this.id, trace_id: traceId, tool: def.name });
    }
    const trace = new Trace(this.#lane, this.id, traceId, def, frozen, episode, this.#generation, this.#seq, this.#state, startedAt, abort.signal, this.#live);
    this.#traces.add(trace);
    this.#rt.router.start(def.name, trace, trace);
    return traceId;
  }

  /**
   * The result of a dispatched call. With `timeoutMs`, returns a partial result (`info.status:
   * "timeout"`, the current state, rewards pending) if the call has not finished by then; the
   * call goes on and a later `resolve` returns the final result. A final result is handed out once.
   */
  resolve(traceId: string, options: ResolveOptions = {}): Promise<StepResult> {
    const trace = this.#traces.get(traceId);
    if (!trace) {
      return Promise.reject(
        new AgentError('TRACE_UNKNOWN', `instance '${this.id}' has no pending trace '${traceId}'`, {
          hint: 'A trace id is resolved to its final result once; dispatch returns a new one per call.',
        }),
      );
    }
    const { timeoutMs, signal } = options;
    if (signal === undefined && (timeoutMs === undefined || !Number.isFinite(timeoutMs))) {
      // The common Gym-style path: no race, no timer, no async frame.
      if (trace.final) {
        this.#forget(trace);
        return Promise.resolve(trace.final);
      }
      trace.claimed = true;
      return this.#settledOf(trace);
    }
    return this.#resolveWithin(trace, timeoutMs, signal);
  }

  async #resolveWithin(trace: Trace, timeoutMs: number | undefined, signal: AbortSignal | undefined): Promise<StepResult> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const waits: Promise<StepResult | undefined>[] = [this.#settledOf(trace)];
      if (timeoutMs !== undefined && Number.isFinite(timeoutMs)) waits.push(new Promise((r) => (timer = setTimeout(r, Math.max(0, timeoutMs), undefined))));
      const result = await raceAbort(Promise.race(waits), signal);
      if (result) {
        this.#forget(trace);
        return result;
      }
      return this.#partial(trace);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The trace's final result, as a promise made on first demand. */
  #settledOf(trace: Trace): Promise<StepResult> {
    if (trace.final) return Promise.resolve(trace.final);
    if (trace.broken) return Promise.reject(trace.broken.error as Error);
    trace.settled ??= new Promise<StepResult>((resolve, reject) => {
      trace.resolveSettled = resolve;
      trace.rejectSettled = reject;
    });
    return trace.settled;
  }

  /** A final result is handed out once: the trace leaves the table (if a reset has not emptied it already). */
  #forget(trace: Trace): void {
    this.#traces.delete(trace);
  }

  /** Gym-style: dispatch then resolve. */
  step(action: Action, options: ResolveOptions = {}): Promise<StepResult> {
    let traceId: string;
    try {
      traceId = this.dispatch(action);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return this.resolve(traceId, options);
  }

  pause(): void {
    this.#transition('paused');
  }

  resume(): void {
    if (this.#status !== 'paused') assertTransition(this.id, this.#status, 'running');
    this.#transition('running');
  }

  /** Cancel every call in flight and end the instance. Its history stays readable. */
  async terminate(reason = 'terminated'): Promise<void> {
    this.#transition('terminated');
    const open = this.#traces.values().filter((t) => !t.final && !t.broken);
    this.#cancelAll(() => withoutStack(() => new AgentError('TOOL_CANCELLED', reason)));
    await Promise.all(open.map((t) => this.#settledOf(t)));
    await this.#commits;
    if (this.#generation > 0 && this.#rt.rewards.active) this.#rt.rewards.episodeEnded(this.id, this.#episode);
  }

  /** Abort the episode's calls (tools see their signal fire) and settle their traces as cancelled; `reason` is made only when something is to be cancelled (an instance's first reset has nothing). */
  #cancelAll(reason: () => AgentErrorType): void {
    const abort = this.#episodeAbort;
    this.#episodeAbort = undefined;
    if (!abort && this.#live.size === 0 && this.#traces.size === 0) return;
    const error = reason();
    if (abort) {
      abort.controller.abort(error);
      abort[Symbol.dispose]();
    }
    for (const c of this.#live) c.abort(error);
    this.#live.clear();
    for (const t of this.#traces.values()) this.#take(t, { ok: false, error: new ToolError('TOOL_CANCELLED', t.action.name, `cancelled: ${describeError(error)}`, { cause: error }), attempts: 0 });
  }

  /** The first outcome of a trace wins: the tool's, or a cancellation that did not wait for it. */
  #take(trace: Trace, outcome: ToolCallOutcome): void {
    if (trace.taken) return;
    trace.taken = true;
    let final: StepResult | Promise<StepResult>;
    try {
      final = this.#settle(trace, outcome);
    } catch (err) {
      this.#broken(trace, err);
      return;
    }
    if (isPromise(final)) {
      final.then(
        (f) => this.#settled(trace, f),
        (err: unknown) => this.#broken(trace, err),
      );
    } else this.#settled(trace, final);
  }

  /** Settling threw: whoever waits for the trace gets the error, as they would from an async settle. */
  #broken(trace: Trace, error: unknown): void {
    trace.broken = { error };
    if (trace.claimed) this.#forget(trace);
    trace.rejectSettled?.(error);
  }

  #settled(trace: Trace, final: StepResult): void {
    trace.final = final;
    if (trace.claimed) this.#forget(trace);
    trace.resolveSettled?.(final);
  }

  archive(): void {
    this.#transition('archived');
  }

  /** Time travel: the state as it was at a seq, or at an event time (epoch ms). */
  stateAt(point: StatePoint, signal?: AbortSignal): Promise<Snapshot> {
    return this.#rt.store.stateAt(this.id, point, signal);
  }

  #transition(to: LifecycleStatus): void {
    const from = this.#status;
    assertTransition(this.id, from, to);
    this.#status = to;
    if (from !== to) this.#emit({ type: 'lifecycle_changed', time: this.#rt.clock.now(), instance_id: this.id, from, to, episode: this.#episode });
  }

  /**
   * Runs `work` after every commit queued before it. With nothing queued, `work` runs now, and a
   * synchronous result (the memory store) is returned as it is: no promise, no microtask hop.
   * A synchronous throw is thrown to the caller.
   */
  #serialized<T>(work: () => T | Promise<T>): T | Promise<T> {
    if (this.#queued === 0) {
      const now = work();
      return isPromise(now) ? this.#enqueue(now) : now;
    }
    return this.#enqueue(this.#commits.then(work));
  }

  #enqueue<T>(pending: Promise<T>): Promise<T> {
    this.#queued += 1;
    const done = (): void => void (this.#queued -= 1);
    this.#commits = pending.then(done, done);
    return pending;
  }

  /**
   * Runs when the tool call settles: validate, commit, emit, build the final result. Synchronous
   * when the commit is (nothing queued before it, a store that appends at once).
   */
  #settle(trace: Trace, outcome: ToolCallOutcome): StepResult | Promise<StepResult> {
    const durationMs = this.#rt.clock.monotonic() - trace.startedAt;
    if (this.#observed) this.#emit({
      type: 'tool_finished',
      time: this.#rt.clock.now(),
      instance_id: this.id,
      trace_id: trace.traceId,
      tool: trace.action.name,
      ok: outcome.ok,
      duration_ms: durationMs,
      attempts: outcome.attempts,
      ...(outcome.ok ? {} : { error: errorInfo(outcome.error) }),
      ...(outcome.ok && outcome.fallback ? { fallback: outcome.fallback.by } : {}),
    });
    if (!outcome.ok) return this.#conclude(trace, outcome, durationMs, undefined, outcome.error);
    let committed: Committed | Promise<Committed>;
    try {
      // #serialized's work inline when nothing is queued: no closure per step.
      if (this.#queued === 0) {
        committed = this.#commit(trace, outcome.result);
        if (isPromise(committed)) committed = this.#enqueue(committed);
      } else committed = this.#serialized(() => this.#commit(trace, outcome.result));
    } catch (err) {
      return this.#conclude(trace, outcome, durationMs, undefined, asAgentError(err));
    }
    if (!isPromise(committed)) return this.#conclude(trace, outcome, durationMs, committed, undefined);
    return committed.then(
      (c) => this.#conclude(trace, outcome, durationMs, c, undefined),
      (err: unknown) => this.#conclude(trace, outcome, durationMs, undefined, asAgentError(err)),
    );
  }

  /** The step numbered and its final result built, once its commit is done (or failed). */
  #conclude(trace: Trace, outcome: ToolCallOutcome, durationMs: number, committed: Committed | undefined, error: AgentErrorType | undefined): StepResult {
    const tool = trace.action.name;
    // Steps are numbered here, in the order their trace_settled events go out.
    const step = trace.generation === this.#generation ? ++this.#steps : 0;
    let final: StepResult;
    if (committed) final = this.#rewarded(trace, outcome as Extract<ToolCallOutcome, { ok: true }>, durationMs, committed, step);
    else {
      error ??= new AgentError('INTERNAL', 'tool call settled without a result');
      // A failed step has no result to judge: no source is expected for it, and its reward is no number (see export).
      final = {
        state: this.#state,
        reward: 0,
        rewards: {},
        done: false,
        info: { trace_id: trace.traceId, status: 'failed', action: tool, step, seq: this.#seq, duration_ms: durationMs, attempts: outcome.attempts, error: errorInfo(error) },
      };
      if (this.#observed) this.#emit({ type: 'error', time: this.#rt.clock.now(), instance_id: this.id, trace_id: trace.traceId, error: errorInfo(error) });
    }
    // Scalars first: a reader indexing millions of these lines takes them from the line's head.
    if (this.#observed) this.#emit({
      type: 'trace_settled',
      time: this.#rt.clock.now(),
      instance_id: this.id,
      trace_id: trace.traceId,
      episode: trace.episode,
      step,
      action: tool,
      seq_before: trace.seqBefore,
      status: final.info.status === 'failed' ? 'failed' : 'resolved',
      reward: final.reward,
      done: final.done,
      seq: final.info.seq,
      duration_ms: durationMs,
      ...(trace.action.actor === 'user' ? { actor: 'user' as const } : {}), // after the scalars the folder feed reads from a line's head
      params: trace.params,
      ...(final.observation !== undefined ? { observation: final.observation } : {}),
      rewards: final.rewards,
      ...(final.info.error ? { error: final.info.error } : {}),
    });
    return final;
  }

  /** Validate and write the tool's result; synchronous when the store's append is. Throws (or rejects) and writes nothing when it is invalid. */
  #commit(trace: Trace, result: ToolResult): Committed | Promise<Committed> {
    const tool = trace.action.name;
    if (trace.generation !== this.#generation || this.#status === 'terminated' || this.#status === 'archived') {
      throw new AgentError('TOOL_CANCELLED', `result of '${tool}' arrived after its episode ended; it was not committed`);
    }
    // Rewards are checked before anything is written, so a bad reward leaves the state untouched too.
    const rewards = stepRewards(this.#rt.definition.rewards, result.rewards, tool, this.#rt.clock.now());
    if (!result.patch || result.patch.length === 0) {
      if (result.done) this.#done = true;
      return { state: this.#state, seq: this.#seq, rewards, result };
    }
    const patch = result.patch;
    const next = applyFrozenPatch(this.#state, patch);
    const issues = this.#rt.stateValidator.validateChange(next, patch);
    if (issues.length > 0) {
      throw new ValidationError('STATE_INVALID', `tool '${tool}' returned a patch that makes the state invalid (nothing was written)`, withValues(issues, next), `Fix the patch that '${tool}' returns.`);
    }
    const store = this.#rt.store;
    const delta = { patch, time: this.#rt.clock.now(), trace_id: trace.traceId };
    const written = store.appendNow ? store.appendNow(this.id, delta, next) : store.append(this.id, delta, next, this.#rt.signal);
    if (typeof written === 'number') return this.#written(trace, result, rewards, next, written);
    return written.then((seq) => this.#written(trace, result, rewards, next, seq));
  }

  #written(trace: Trace, result: ToolResult, rewards: StepRewards, next: JsonValue, seq: number): Committed {
    this.#state = next;
    this.#seq = seq;
    if (result.done) this.#done = true;
    if (this.#observed) this.#emit({ type: 'state_committed', time: this.#rt.clock.now(), instance_id: this.id, trace_id: trace.traceId, seq, patch: result.patch ?? [] });
    return { state: next, seq, rewards, result };
  }

  /** The committed result with its step number, the tool's rewards announced, and the delayed sources started. */
  #rewarded(trace: Trace, outcome: Extract<ToolCallOutcome, { ok: true }>, durationMs: number, committed: Committed, step: number): StepResult {
    const { rewards, result } = committed;
    const time = this.#rt.clock.now();
    if (this.#observed) {
      // Every reward a tool reports has arrived with its step (step-rewards.ts).
      for (const source in rewards.entries) {
        const value = (rewards.entries[source] as RewardEntry).value as number;
        this.#emit({ type: 'reward_arrived', time, instance_id: this.id, trace_id: trace.traceId, episode: trace.episode, step, source, value, key: 'tool', delay_ms: 0, reward: rewards.total });
      }
    }
    const delayed = this.#rt.rewards.active
      ? this.#rt.rewards.stepSettled({
          traceId: trace.traceId,
          instanceId: this.id,
          episode: trace.episode,
          step,
          action: trace.action.name,
          time,
          params: trace.params,
          ...(result.observation !== undefined ? { observation: result.observation } : {}),
          stateBefore: trace.state,
          stateAfter: committed.state,
          immediate: rewards.total,
        })
      : undefined;
    const info: Mutable<StepInfo> = { trace_id: trace.traceId, status: 'resolved', action: trace.action.name, step, seq: committed.seq, duration_ms: durationMs, attempts: outcome.attempts };
    if (outcome.fallback) info.fallback = outcome.fallback.by;
    const reward = rewards.total;
    const entries = delayed ? Object.assign({}, rewards.entries, delayed) : rewards.entries;
    const done = result.done === true;
    // Two literals rather than a spread of `{observation}` or `{}`: a step's result is built at every step, from a process's first.
    return result.observation !== undefined ? { state: committed.state, observation: result.observation, reward, rewards: entries, done, info } : { state: committed.state, reward, rewards: entries, done, info };
  }

  #partial(trace: Trace): StepResult {
    return {
      state: this.#state,
      reward: 0,
      rewards: {},
      done: false,
      info: { trace_id: trace.traceId, status: 'timeout', action: trace.action.name, step: 0, seq: this.#seq, duration_ms: this.#rt.clock.monotonic() - trace.startedAt, attempts: 0 },
    };
  }

  #emit(event: EnvEvent): void {
    this.#rt.events.emit(event);
    try {
      switch (event.type) {
        case 'tool_started':
          this.#hooks.onToolCallStart?.(event);
          break;
        case 'tool_finished':
          this.#hooks.onToolCallEnd?.(event);
          break;
        case 'state_committed':
          this.#hooks.onStateChange?.(event);
          break;
        case 'reward_arrived':
          this.#hooks.onRewardReceived?.(event);
          break;
        case 'lifecycle_changed':
          this.#hooks.onLifecycle?.(event);
          break;
        default:
          break;
      }
    } catch (err) {
      this.#rt.events.emit({ type: 'error', time: this.#rt.clock.now(), instance_id: this.id, error: { code: 'INTERNAL', message: `hook for ${event.type} threw: ${describeError(err)}` } });
    }
  }
}
