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
import type { ErrorInfo } from '../env/events.js';
import { generate } from '../schema/generate.js';
import { RunWriter } from '../replay/run-writer.js';
import { systemClock, type Clock } from '../shared/clock.js';
import { Emitter } from '../shared/emitter.js';
import { AgentError, isAgentError, UsageError, describeError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { hashSeed, Rng } from '../shared/rng.js';
import { loadPolicy, type Policy } from './policy.js';
import type { EpisodeEndReason, RunConfig, RunEvent } from './run-events.js';
import { RunStats, type RunProgress } from './run-stats.js';

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
  readonly clock?: Clock;
  readonly blockThresholdMs?: number;
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
    readonly by_source: Readonly<Record<string, { readonly arrived: number; readonly pending: number; readonly mean: number | null }>>;
  };
  readonly loop_blocked: number;
}

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
  readonly events: Emitter<RunEvent>;
  readonly config: RunConfig;
  readonly #env: AgentEnv;
  readonly #policy: Policy;
  readonly #out: string;
  readonly #clock: Clock;
  readonly #stats: RunStats;
  readonly #initialStates: readonly JsonValue[];
  #dir: string | undefined;

  private constructor(env: AgentEnv, policy: Policy, config: RunConfig, out: string, clock: Clock, initialStates: readonly JsonValue[]) {
    this.#env = env;
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
    const env = await AgentEnv.open(options.env, {
      seed,
      clock,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.toolOptions ? { toolOptions: options.toolOptions } : {}),
      ...(options.blockThresholdMs !== undefined ? { blockThresholdMs: options.blockThresholdMs } : {}),
      // A run keeps one instance per episode; trim each history so long runs stay bounded.
      storeOptions: { snapshotEvery: 50, retainDeltas: 1_000 },
      watchEventLoop: true,
    });
    let initialStates = env.definition.initialStates;
    if (initialStates.length === 0) {
      const generated = generate(env.definition.stateSchema, new Rng(hashSeed(seed, 'initial-state')));
      if (generated.value === undefined) {
        await env[Symbol.asyncDispose]();
        throw new UsageError(`env '${env.definition.name}' declares no initial states and none could be generated from its state schema`, 'Add initial_states.json (an array of states) to the env folder.');
      }
      initialStates = [generated.value];
    }
    const policyName = typeof options.policy === 'function' ? options.policy.name || 'custom' : (options.policy ?? 'random');
    return new Run(env, policy, { env: env.definition.name, episodes, concurrency, maxSteps, seed, policy: policyName }, options.out ?? 'runs', clock, initialStates);
  }

  /** The run folder, once `execute` has created it. */
  get dir(): string | undefined {
    return this.#dir;
  }

  get definition(): AgentEnv['definition'] {
    return this.#env.definition;
  }

  progress(): RunProgress {
    return this.#stats.snapshot();
  }

  /** Run every episode. Aborting `signal` stops gracefully: calls in flight are cancelled and the folder is flushed, marked interrupted. */
  async execute(signal: AbortSignal = new AbortController().signal): Promise<RunSummary> {
    setMaxListeners(0, signal);
    const started = this.#clock.now();
    const runId = runIdFor(started, this.config.seed);
    await using writer = await RunWriter.create(this.#out, runId);
    this.#dir = writer.dir;
    const unsubscribe = [this.events.onAny((e) => writer.write(e)), this.#env.events.onAny((e) => this.events.emit(e))];
    try {
      this.events.emit({ type: 'run_started', time: started, runId, dir: writer.dir, config: this.config });
      let next = 0;
      const worker = async (): Promise<void> => {
        while (!signal.aborted && next < this.config.episodes) await this.#episode(next++, signal);
      };
      await Promise.all(Array.from({ length: Math.min(this.config.concurrency, this.config.episodes) }, worker));
      const status = signal.aborted ? 'interrupted' : 'completed';
      // Closing the env cancels whatever is still in flight; those traces settle (as cancelled) into the logs.
      await this.#env[Symbol.asyncDispose]();
      this.events.emit({ type: 'run_finished', time: this.#clock.now(), runId, status });
      const summary = this.#summary(runId, status, started);
      await writer.finish(summary);
      return summary;
    } finally {
      for (const off of unsubscribe) off();
      await this.#env[Symbol.asyncDispose]();
    }
  }

  async #episode(index: number, signal: AbortSignal): Promise<void> {
    const started = this.#clock.monotonic();
    const agent = this.#env.createInstance({ id: `ep-${index}` });
    this.events.emit({ type: 'episode_started', time: this.#clock.now(), instanceId: agent.id, episode: index });
    const rng = new Rng(hashSeed(this.config.seed, 'policy', index));
    let steps = 0;
    let reward = 0;
    let reason: EpisodeEndReason = 'max_steps';
    let error: ErrorInfo | undefined;
    try {
      await agent.reset(this.#initialStates[index % this.#initialStates.length] ?? null, { signal });
      let lastObservation: JsonValue | undefined;
      for (; steps < this.config.maxSteps; ) {
        const actions = agent.availableActions();
        if (actions.length === 0) {
          reason = 'no_actions';
          break;
        }
        const choice = await this.#choose(agent, { state: agent.state, actions, episode: index, step: steps, ...(lastObservation !== undefined ? { lastObservation } : {}) }, rng, signal);
        if (choice === null) {
          reason = 'policy_stop';
          break;
        }
        const result = await agent.resolve(choice, { signal });
        steps++;
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
      this.#env.release(agent.id);
    }
    this.events.emit({
      type: 'episode_finished',
      time: this.#clock.now(),
      instanceId: agent.id,
      episode: index,
      steps,
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
    return action === null ? null : agent.dispatch(action);
  }

  /** Release the env without running (after `execute`, it is released already). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.#env[Symbol.asyncDispose]();
  }

  #summary(runId: string, status: RunSummary['status'], started: number): RunSummary {
    const p = this.#stats.snapshot();
    const finished = this.#clock.now();
    const episodeMean = p.episodeRewards.count === 0 ? 0 : p.episodeRewards.sum / p.episodeRewards.count;
    return {
      schema_version: 1,
      run_id: runId,
      env: this.config.env,
      status,
      started_at: new Date(started).toISOString(),
      finished_at: new Date(finished).toISOString(),
      duration_ms: finished - started,
      config: this.config,
      episodes: { requested: this.config.episodes, finished: p.episodesDone, by_reason: p.episodesByReason },
      steps: { total: p.steps, failed: p.failedSteps, per_second: Math.round(p.stepsPerSecond * 100) / 100 },
      tools: Object.fromEntries(
        Object.entries(p.tools).map(([name, t]) => [name, { calls: t.calls, failed: t.failed, mean_ms: t.calls === 0 ? 0 : Math.round((t.totalMs / t.calls) * 1000) / 1000, errors: t.errors }]),
      ),
      rewards: {
        per_episode: { mean: episodeMean, min: p.episodeRewards.min, max: p.episodeRewards.max },
        by_source: Object.fromEntries(
          [...this.#env.definition.rewards.keys()].map((name) => {
            const s = p.rewardsBySource[name] ?? { arrived: 0, pending: 0, sum: 0 };
            return [name, { arrived: s.arrived, pending: s.pending, mean: s.arrived === 0 ? null : s.sum / s.arrived }];
          }),
        ),
      },
      loop_blocked: p.loopBlocked.length,
    };
  }
}
