/**
 * `agent run` as a library: runs N episodes of an env with a policy, C at a time, and writes a
 * run folder. Reporters subscribe to `run.events` and read `run.progress()`; nothing here prints.
 *
 * @example
 * const run = await Run.prepare({ env: 'fixtures/weather', episodes: 20, concurrency: 8 });
 * run.events.on('episode_finished', (e) => console.log(e.episode, e.reward));
 * const summary = await run.execute(controller.signal);
 */
import { setMaxListeners } from 'node:events';
import { AgentEnv } from '../env/agent-env.js';
import type { AgentInstance } from '../env/agent-instance.js';
import type { EnvEvent, ErrorInfo } from '../env/events.js';
import { generate } from '../schema/generate.js';
import { RunWriter } from '../replay/run-writer.js';
import { systemClock, type Clock } from '../shared/clock.js';
import { Emitter } from '../shared/emitter.js';
import { AgentError, isAgentError, UsageError, describeError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { RedisStateStore } from '../state/redis-store.js';
import type { StateStore } from '../state/store.js';
import { hashSeed, Rng } from '../shared/rng.js';
import { loadPolicy, type Policy } from './policy.js';
import type { EpisodeEndReason, RunConfig, RunEvent } from './run-events.js';
import { RunStats, type RunProgress } from './run-stats.js';
import type { RunningCall } from '../tools/router.js';
import type { RewardBinding } from '../schema/definition.js';
import type { SourceSla } from '../reward/ledger.js';
import type { EvaluatorStats } from '../reward/evaluators.js';
import { diffStates } from '../state/diff.js';
import { RunServer } from '../server/run-server.js';

export interface RunOptions {
  /** The env folder. */
  readonly env: string;
  readonly episodes?: number;
  readonly concurrency?: number;
  readonly maxSteps?: number;
  /** `random` (default), a policy module path, or a policy function. */
  readonly policy?: string | Policy;
  readonly seed?: number;
  /** Parent folder of run folders (default `runs`). */
  readonly out?: string;
  readonly toolOptions?: Readonly<Record<string, JsonValue>>;
  /** Replace reward source bindings of the env (see `LoadEnvOptions.rewardSources`). */
  readonly rewardSources?: Readonly<Record<string, unknown>>;
  readonly clock?: Clock;
  readonly blockThresholdMs?: number;
  /**
   * Where episode states live while they run: a StateStore, `'memory'` (the default) or a Redis
   * URL (`redis://host:port/db`, keys under `agent:<run-id>:`). Each is dropped when its episode ends.
   */
  readonly store?: StateStore | string;
  /** Start the run's local server on 127.0.0.1 (0: any free port): `POST /rewards` delivers delayed rewards while the run is live. */
  readonly port?: number;
  /** Aborts loading (prepare); `execute` takes its own signal. */
  readonly signal?: AbortSignal;
}

export interface RunSummary {
  readonly schema_version: 1;
  readonly run_id: string;
  readonly env: string;
  readonly status: 'completed' | 'interrupted';
  readonly started_at: string;
  readonly finished_at: string;
  readonly duration_ms: number;
  readonly config: RunConfig;
  readonly episodes: { readonly requested: number; readonly finished: number; readonly by_reason: Readonly<Partial<Record<EpisodeEndReason, number>>> };
  readonly steps: { readonly total: number; readonly failed: number; readonly per_second: number };
  readonly tools: Readonly<Record<string, { readonly calls: number; readonly failed: number; readonly mean_ms: number; readonly errors: Readonly<Record<string, number>> }>>;
  readonly rewards: {
    readonly per_episode: { readonly mean: number; readonly min: number; readonly max: number };
    readonly by_source: Readonly<Record<string, SourceSummary>>;
  };
  readonly loop_blocked: number;
  /** Records the run folder could not write (a full disk, a value that is not JSON): never dropped silently. */
  readonly records_lost?: { readonly records: number; readonly reason: string };
  /** Calls whose handler ignored its AbortSignal and was still running when the run closed. */
  readonly abandoned_calls?: readonly { readonly tool: string; readonly trace_id: string }[];
  /** Set when the run completed but could not have worked: every step failed, no action was ever enabled, … */
  readonly problem?: string;
}

/** One reward source over the run: values that arrived, their mean, and for delayed sources the SLA and what computing them cost. */
export interface SourceSummary {
  readonly binding: RewardBinding['kind'];
  readonly arrived: number;
  readonly pending: number;
  /** Mean of the values that arrived (late ones included); null when none did. */
  readonly mean: number | null;
  readonly sla?: SourceSla;
  /** Module and judge sources: calls made, failures, and for a judge tokens and cost. */
  readonly calls?: EvaluatorStats;
}

/** How long the run loop may keep the event loop before it yields to I/O (see #breathe). */
const YIELD_EVERY_MS = 8;

function positiveInt(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < 1) throw new UsageError(`${name} must be a whole number ≥ 1 (got ${String(value)})`, `Pass --${name} with a positive integer.`);
  return v;
}

function runIdFor(time: number, seed: number): string {
  const stamp = new Date(time).toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `${stamp}-${hashSeed(time, seed, process.pid).toString(16).padStart(8, '0').slice(0, 6)}`;
}

export class Run implements AsyncDisposable {
  /** Names the run folder (`<out>/<run-id>/`) and, with a Redis store, the run's keys. */
  readonly runId: string;
  readonly events: Emitter<RunEvent>;
  /** A store the run opened itself (from a URL), closed with it. */
  readonly #ownedStore: StateStore | undefined;
  readonly config: RunConfig;
  readonly #env: AgentEnv;
  readonly #policy: Policy;
  readonly #out: string;
  readonly #clock: Clock;
  readonly #stats: RunStats;
  readonly #initialStates: readonly JsonValue[];
  readonly #port: number | undefined;
  #dir: string | undefined;
  #writer: RunWriter | undefined;
  #server: RunServer | undefined;
  #lastYield = 0;
  /** The steps (settled traces) each live instance has taken. */
  readonly #steps = new Map<string, { steps: number }>();
  /** Episodes that ran to an end (not interrupted): the per-episode reward statistics cover these. */
  readonly #counted = new Set<number>();
  /** The actions offered to the policy for each trace in flight, for its trajectory record. */
  readonly #offered = new Map<string, readonly string[]>();

  private constructor(runId: string, env: AgentEnv, ownedStore: StateStore | undefined, policy: Policy, config: RunConfig, out: string, clock: Clock, initialStates: readonly JsonValue[], port: number | undefined) {
    this.runId = runId;
    this.#port = port;
    this.#env = env;
    this.#ownedStore = ownedStore;
    this.#policy = policy;
    this.config = config;
    this.#out = out;
    this.#clock = clock;
    this.#initialStates = initialStates;
    this.#stats = new RunStats(() => clock.now());
    this.events = new Emitter<RunEvent>();
    this.events.onAny((e) => this.#stats.apply(e));
  }

  /** Validate options, load the env and the policy. Nothing is written yet; errors here are the user's (exit 2). */
  static async prepare(options: RunOptions): Promise<Run> {
    const episodes = positiveInt('episodes', options.episodes, 20);
    const concurrency = positiveInt('concurrency', options.concurrency, 8);
    const maxSteps = positiveInt('max-steps', options.maxSteps, 10);
    const seed = options.seed ?? 0;
    if (!Number.isInteger(seed)) throw new UsageError(`seed must be an integer (got ${seed})`);
    const policy = typeof options.policy === 'function' ? options.policy : await loadPolicy(options.policy ?? 'random');
    const clock = options.clock ?? systemClock;
    const runId = runIdFor(clock.now(), seed);
    const owned = await storeFor(options.store, runId, options.signal);
    const store = owned ?? (typeof options.store === 'object' ? options.store : undefined);
    let env: AgentEnv;
    try {
      env = await AgentEnv.open(options.env, {
        seed,
        clock,
        ...(options.signal ? { signal: options.signal } : {}),
        ...(options.toolOptions ? { toolOptions: options.toolOptions } : {}),
        ...(options.rewardSources ? { rewardSources: options.rewardSources } : {}),
        ...(options.blockThresholdMs !== undefined ? { blockThresholdMs: options.blockThresholdMs } : {}),
        // A run keeps one instance per episode; trim each history so long runs stay bounded.
        ...(store ? { store } : { storeOptions: { snapshotEvery: 50, retainDeltas: 1_000 } }),
        watchEventLoop: true,
      });
    } catch (err) {
      await owned?.[Symbol.asyncDispose]();
      throw err;
    }
    let initialStates = env.definition.initialStates;
    if (initialStates.length === 0) {
      const generated = generate(env.definition.stateSchema, new Rng(hashSeed(seed, 'initial-state')));
      if (generated.value === undefined) {
        await env[Symbol.asyncDispose]();
        await owned?.[Symbol.asyncDispose]();
        throw new UsageError(`env '${env.definition.name}' declares no initial states and none could be generated from its state schema`, 'Add initial_states.json (an array of states) to the env folder.');
      }
      initialStates = [generated.value];
    }
    const policyName = typeof options.policy === 'function' ? options.policy.name || 'custom' : (options.policy ?? 'random');
    if (options.port !== undefined && (!Number.isInteger(options.port) || options.port < 0 || options.port > 65_535)) {
      await env[Symbol.asyncDispose]();
      await owned?.[Symbol.asyncDispose]();
      throw new UsageError(`port must be a whole number from 0 to 65535 (got ${options.port})`, 'Pass --port 0 for any free port.');
    }
    return new Run(runId, env, owned, policy, { env: env.definition.name, episodes, concurrency, maxSteps, seed, policy: policyName }, options.out ?? 'runs', clock, initialStates, options.port);
  }

  /** The local server's port, once `execute` has started it (with the `port` option). */
  get port(): number | undefined {
    return this.#server?.port;
  }

  /** The run folder, once `execute` has created it. */
  get dir(): string | undefined {
    return this.#dir;
  }

  get definition(): AgentEnv['definition'] {
    return this.#env.definition;
  }

  progress(): RunProgress {
    return { ...this.#stats.snapshot(), rewardFlow: this.#env.rewards.ledger.counts() };
  }

  /** The env's rewards: `submit` delivers a delayed value while the run is live. */
  get rewards(): AgentEnv['rewards'] {
    return this.#env.rewards;
  }

  /** Run every episode. Aborting `signal` stops gracefully: calls in flight are cancelled and the folder is flushed, marked interrupted. */
  async execute(signal: AbortSignal = new AbortController().signal): Promise<RunSummary> {
    setMaxListeners(0, signal);
    const started = this.#clock.now();
    const runId = this.runId;
    await using server = this.#port === undefined ? undefined : await RunServer.start({ port: this.#port, runId, rewards: this.#env.rewards });
    this.#server = server;
    await using writer = await RunWriter.create(this.#out, runId, this.#manifest(started));
    this.#dir = writer.dir;
    this.#writer = writer;
    const unsubscribe = [this.events.onAny((e) => writer.write(e)), this.#env.events.onAny((e) => this.#forward(e))];
    try {
      this.events.emit({ type: 'run_started', time: started, runId, dir: writer.dir, config: this.config, ...(server ? { port: server.port } : {}) });
      let next = 0;
      const worker = async (): Promise<void> => {
        while (!signal.aborted && next < this.config.episodes) await this.#episode(next++, signal);
      };
      await Promise.all(Array.from({ length: Math.min(this.config.concurrency, this.config.episodes) }, worker));
      // Judges and reward models still working on the last steps deliver before the folder closes.
      await this.#env.rewards.settle(signal);
      this.#env.rewards.expireDue();
      const status = signal.aborted ? 'interrupted' : 'completed';
      // Closing the env cancels whatever is still in flight; those traces settle (as cancelled) into the logs.
      await this.#env[Symbol.asyncDispose]();
      const abandoned = this.#env.runningCalls();
      if (abandoned.length > 0) this.events.emit({ type: 'calls_abandoned', time: this.#clock.now(), calls: abandoned });
      this.events.emit({ type: 'run_finished', time: this.#clock.now(), runId, status });
      const summary = withLoss(this.#summary(runId, status, started, abandoned), writer.loss);
      await writer.finish(summary);
      // A write that failed while flushing is known only now: the caller hears of it all the same.
      return withLoss(summary, writer.loss);
    } finally {
      for (const off of unsubscribe) off();
      this.#writer = undefined;
      await this[Symbol.asyncDispose]();
    }
  }

  /** Env events into the run's stream; a settled step gets the actions its policy chose among. */
  #forward(e: EnvEvent): void {
    if (e.type !== 'trace_settled') return this.events.emit(e);
    const counts = this.#steps.get(e.instanceId);
    if (counts) counts.steps++;
    const offered = this.#offered.get(e.traceId);
    this.#offered.delete(e.traceId);
    this.events.emit(offered ? { ...e, availableActions: offered } : e);
  }

  /** run.json: what `agent reward` and `agent export` need to work on the folder once this process is gone. */
  #manifest(started: number): object {
    const def = this.#env.definition;
    return {
      schema_version: 1,
      run_id: this.runId,
      env: def.name,
      env_dir: def.dir,
      started_at: new Date(started).toISOString(),
      pid: process.pid,
      ...(this.#server ? { port: this.#server.port } : {}),
      config: this.config,
      reward_sources: Object.fromEntries(
        [...def.rewards.values()].map((r) => [
          r.name,
          {
            binding: r.binding.kind,
            schema: r.schema,
            delay_ms: r.delayMs,
            ...(r.deadlineMs !== undefined ? { deadline_ms: r.deadlineMs } : {}),
            aggregation: r.aggregation,
            weight: r.weight,
            ...(r.fallback ? { fallback: r.fallback } : {}),
            ...(r.binding.kind === 'module' || r.binding.kind === 'judge' ? { scope: r.binding.scope } : {}),
          },
        ]),
      ),
    };
  }

  /**
   * Give I/O a turn: a tool that answers at once makes the loop pure microtasks, which would starve
   * the writer, signals and timers. Yield every few ms, and wait while the run folder catches up.
   */
  async #breathe(): Promise<void> {
    const now = performance.now();
    if (now - this.#lastYield < YIELD_EVERY_MS && !this.#writer?.needsDrain) return;
    await new Promise((r) => setImmediate(r));
    await this.#writer?.drained();
    this.#lastYield = performance.now();
  }

  async #episode(index: number, signal: AbortSignal): Promise<void> {
    const started = this.#clock.monotonic();
    const agent = this.#env.createInstance({ id: `ep-${index}` });
    const counts = { steps: 0 };
    this.#steps.set(agent.id, counts);
    const stateIndex = index % this.#initialStates.length;
    this.events.emit({ type: 'episode_started', time: this.#clock.now(), instanceId: agent.id, episode: index, initialStateId: `initial-${stateIndex}` });
    const rng = new Rng(hashSeed(this.config.seed, 'policy', index));
    let reward = 0;
    let reason: EpisodeEndReason = 'max_steps';
    let error: ErrorInfo | undefined;
    const initial = this.#initialStates[stateIndex] ?? null;
    const startedAt = this.#clock.now();
    /** The initial state as the instance holds it (a frozen copy): the final state is diffed against it. */
    let start: JsonValue | undefined;
    try {
      await agent.reset(initial, { signal, episode: index });
      start = agent.state;
      this.#writer?.writeState(`initial-${stateIndex}`, start);
      let lastObservation: JsonValue | undefined;
      for (let step = 0; step < this.config.maxSteps; step++) {
        await this.#breathe();
        if (signal.aborted) throw signal.reason;
        const actions = agent.availableActions();
        if (actions.length === 0) {
          reason = 'no_actions';
          break;
        }
        const choice = await this.#choose(agent, { state: agent.state, actions, episode: index, step, ...(lastObservation !== undefined ? { lastObservation } : {}) }, rng, signal);
        if (choice === null) {
          reason = 'policy_stop';
          break;
        }
        const result = await agent.resolve(choice, { signal });
        reward += result.reward;
        lastObservation = result.observation;
        if (result.done) {
          reason = 'done';
          break;
        }
      }
    } catch (err) {
      if (signal.aborted) reason = 'interrupted';
      else {
        reason = 'policy_error';
        const e = isAgentError(err) ? err : new AgentError('POLICY_FAILED', describeError(err), { cause: err });
        error = { code: e.code, message: e.message, ...(e.hint ? { hint: e.hint } : {}) };
      }
    } finally {
      if (agent.status !== 'terminated' && agent.status !== 'archived') await agent.terminate(reason === 'interrupted' ? 'the run was interrupted' : 'episode over');
      if (start !== undefined) {
        const truncated = reason === 'max_steps' || reason === 'interrupted' || reason === 'policy_error';
        this.#writer?.writeEpisode({
          episode: index,
          instance_id: agent.id,
          initial_state_id: `initial-${stateIndex}`,
          final_patch: diffStates(start, agent.state),
          final_seq: agent.seq,
          steps: counts.steps,
          reason,
          terminated: !truncated,
          truncated,
          started_at: startedAt,
          finished_at: this.#clock.now(),
        });
      }
      this.#env.release(agent.id);
      // The episode lives on in the run folder; its in-memory history would grow the process by
      // one state log per episode (tens of MB/s on a fast env).
      await this.#env.store.drop(agent.id);
      this.#steps.delete(agent.id);
    }
    if (reason !== 'interrupted') this.#counted.add(index);
    this.events.emit({
      type: 'episode_finished',
      time: this.#clock.now(),
      instanceId: agent.id,
      episode: index,
      steps: counts.steps,
      reward,
      reason,
      durationMs: this.#clock.monotonic() - started,
      ...(error ? { error } : {}),
    });
  }

  /** Ask the policy and dispatch its choice; returns the trace id, or null when the policy stops. */
  async #choose(agent: AgentInstance, observation: Parameters<Policy>[0], rng: Rng, signal: AbortSignal): Promise<string | null> {
    let action;
    try {
      action = await this.#policy(observation, { rng, signal });
    } catch (err) {
      if (isAgentError(err)) throw err;
      throw new AgentError('POLICY_FAILED', `the policy threw: ${describeError(err)}`, { cause: err, hint: 'Fix the policy module.' });
    }
    if (action === null) return null;
    const traceId = agent.dispatch(action);
    this.#offered.set(traceId, observation.actions.map((a) => a.name));
    return traceId;
  }

  /** Release the env without running (after `execute`, it is released already). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.#env[Symbol.asyncDispose]();
    await this.#ownedStore?.[Symbol.asyncDispose]();
  }

  /**
   * Reward per episode, over the episodes that ran to an end (an interrupted one was cut short and
   * would drag the mean down). With delayed sources, each step counts what has arrived or been
   * imputed by now, not only what was known when its episode ended.
   */
  #perEpisode(r: RunProgress['episodeRewards']): RunSummary['rewards']['per_episode'] {
    const rewards = this.#env.rewards;
    if (!rewards.active) return { mean: r.count === 0 ? 0 : round(r.sum / r.count), min: round(r.min), max: round(r.max) };
    const totals = new Map<number, number>([...this.#counted].map((e) => [e, 0]));
    for (const step of rewards.ledger.steps()) {
      const t = totals.get(step.episode);
      if (t !== undefined) totals.set(step.episode, t + (rewards.reward(step.traceId) ?? 0));
    }
    const all = [...totals.values()];
    if (all.length === 0) return { mean: 0, min: 0, max: 0 };
    return { mean: round(all.reduce((a, b) => a + b, 0) / all.length), min: round(Math.min(...all)), max: round(Math.max(...all)) };
  }

  #sourceSummaries(p: RunProgress): Record<string, SourceSummary> {
    const sla = this.#env.rewards.sla();
    const calls = this.#env.rewards.sourceStats();
    return Object.fromEntries(
      [...this.#env.definition.rewards.values()].map((def) => {
        const s = p.rewardsBySource[def.name] ?? { arrived: 0, sum: 0 };
        const summary: SourceSummary = {
          binding: def.binding.kind,
          arrived: s.arrived,
          pending: sla[def.name]?.pending ?? 0,
          mean: s.arrived === 0 ? null : round(s.sum / s.arrived),
          ...(sla[def.name] ? { sla: sla[def.name] } : {}),
          ...(calls[def.name] ? { calls: calls[def.name] } : {}),
        };
        return [def.name, summary];
      }),
    );
  }

  #summary(runId: string, status: RunSummary['status'], started: number, abandoned: readonly RunningCall[]): RunSummary {
    const p = this.#stats.snapshot();
    const finished = this.#clock.now();
    const r = p.episodeRewards;
    const problem = status === 'completed' ? problemOf(p) : undefined;
    return {
      schema_version: 1,
      run_id: runId,
      env: this.config.env,
      status,
      started_at: new Date(started).toISOString(),
      finished_at: new Date(finished).toISOString(),
      duration_ms: Math.round(finished - started),
      config: this.config,
      episodes: { requested: this.config.episodes, finished: p.episodesDone, by_reason: p.episodesByReason },
      steps: { total: p.steps, failed: p.failedSteps, per_second: round(p.stepsPerSecond, 2) },
      tools: Object.fromEntries(
        Object.entries(p.tools).map(([name, t]) => [name, { calls: t.calls, failed: t.failed, mean_ms: t.calls === 0 ? 0 : round(t.totalMs / t.calls, 3), errors: t.errors }]),
      ),
      rewards: {
        per_episode: this.#perEpisode(r),
        by_source: this.#sourceSummaries(p),
      },
      loop_blocked: p.loopBlocked.length,
      ...(abandoned.length > 0 ? { abandoned_calls: abandoned.map((c) => ({ tool: c.tool, trace_id: c.traceId })) } : {}),
      ...(problem ? { problem } : {}),
    };
  }
}

/** The store a URL names, opened for this run (undefined for a StateStore given, or memory). */
async function storeFor(spec: RunOptions['store'], runId: string, signal: AbortSignal | undefined): Promise<StateStore | undefined> {
  if (spec === undefined || typeof spec === 'object' || spec === 'memory') return undefined;
  if (!/^rediss?:\/\//.test(spec)) throw new UsageError(`unknown store '${spec}'`, "Pass --store memory (the default) or a Redis URL such as redis://127.0.0.1:6379/0.");
  return RedisStateStore.connect(spec, { prefix: `agent:${runId}:`, snapshotEvery: 50, retainDeltas: 1_000, ...(signal ? { signal } : {}) });
}

function withLoss(summary: RunSummary, loss: RunWriter['loss']): RunSummary {
  return loss ? { ...summary, records_lost: loss, problem: `${loss.records} record(s) could not be written to the run folder: ${loss.reason}` } : summary;
}

/** Six decimal places: enough for any reward scale, without float noise in summaries. */
function round(n: number, digits = 6): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** Why a completed run could not have worked, or undefined. `agent run` exits 1 on one. */
function problemOf(p: RunProgress): string | undefined {
  const finished = p.episodesDone;
  if (finished === 0) return undefined;
  const byReason = p.episodesByReason;
  if (p.steps > 0 && p.failedSteps === p.steps) {
    const [code, n] = Object.entries(p.errors).sort((a, b) => b[1] - a[1])[0] ?? ['?', 0];
    return `every step failed (${p.steps} of ${p.steps}; ${code} ×${n}${p.firstError ? `: ${p.firstError}` : ''})`;
  }
  if ((byReason.no_actions ?? 0) === finished && p.steps === 0) return 'no action was ever enabled: every episode ended before its first step (check enabled_if against the initial states)';
  if ((byReason.policy_error ?? 0) === finished) return `every episode ended in a policy error${p.firstPolicyError ? `: ${p.firstPolicyError}` : ''}`;
  return undefined;
}
