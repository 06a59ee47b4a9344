/**
 * A distributed run as one worker takes part in it: the driver `agent worker` (rollout-worker.ts)
 * runs claimed episodes with. Env, policy and settings come from the run's journal in Redis (the env
 * found by name under `--envs`, else at the coordinator's path, and refused when its fingerprint is
 * not the run's); every state and journal write is fenced by the worker's lease on its episode, so
 * a worker that lost an episode (paused past its lease) cannot touch its successor's history.
 * Episodes go through the same EpisodeRunner as every other run; the coordinator writes the folder.
 */
import { AgentEnv } from '../env/agent-env.js';
import type { EnvEvent, ErrorInfo } from '../events/env-events.js';
import type { RunConfig, RunEvent, SettledStepEvent, EpisodeEndReason } from '../events/run-events.js';
import type { EpisodeRecord } from '../replay/run-writer.js';
import { linkedController } from '../shared/abort.js';
import { systemClock } from '../shared/clock.js';
import { Emitter } from '../shared/emitter.js';
import { AgentError, isAgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { diffStates } from '../state/diff.js';
import { openRedis, redactUrl, RedisStateStore } from '../state/redis-store.js';
import { RunTraceIds } from '../observe/trace-context.js';
import { distributedKeys } from './distributed-keys.js';
import { closeDurable, DEFAULT_STORE_WAIT_MS, durableHooks, stopRetrying, watchStore, type Durable } from './durable.js';
import { runEnvDir } from './env-dirs.js';
import { initialStatesOf } from '../generate/initial-states.js';
import { breather, EpisodeRunner, STORE_FAILURES, type EpisodeHooks } from './episode-runner.js';
import { FencedJournal, type EpisodeProgress } from './fenced-journal.js';
import { loadPolicy } from './policy.js';
import type { EpisodeFinishedEvent, InflightCall } from './run-journal.js';

/** How a worker's episode ended: its reason, and whether the worker's lease on it was lost on the way. */
export interface WorkerEpisodeOutcome {
  readonly reason: EpisodeEndReason;
  readonly steps: number;
  readonly leaseLost: boolean;
}

export interface JoinOptions {
  readonly store: string;
  readonly workerId: string;
  /** Folders to find the env in by name; without them, the coordinator's path. */
  readonly envs?: readonly string[];
  /** How long Redis may stay away before this worker lets the run go. */
  readonly storeWaitMs?: number;
  readonly signal?: AbortSignal;
}

/** The episode this worker runs: its abort (lease lost, hand-back) and what the journal held of it. */
interface HeldEpisode {
  readonly controller: AbortController;
  readonly progress: EpisodeProgress;
  leaseLost: boolean;
}

interface WorkerSetup {
  readonly runId: string;
  readonly env: AgentEnv;
  readonly durable: Durable<FencedJournal>;
  readonly config: RunConfig;
  readonly initialStates: readonly JsonValue[];
  readonly runner: (run: WorkerRun) => EpisodeRunner;
}

export class WorkerRun implements AsyncDisposable {
  readonly runId: string;
  readonly config: RunConfig;
  /** What this worker does in the run; all but steps and episode ends (which go with their journal writes) is published to the run's stream. */
  readonly events = new Emitter<RunEvent>();
  readonly #env: AgentEnv;
  readonly #durable: Durable<FencedJournal>;
  readonly #initialStates: readonly JsonValue[];
  readonly #runner: EpisodeRunner;
  readonly #hooks: EpisodeHooks;
  readonly #held = new Map<number, HeldEpisode>();
  /** Stops this worker's part of the run from inside: a store failure. */
  readonly #internal = new AbortController();
  #failure: AgentError | undefined;
  #fencedWrites = 0;
  readonly #detach: () => void;

  private constructor(setup: WorkerSetup, storeWaitMs: number) {
    this.runId = setup.runId;
    this.config = setup.config;
    this.#env = setup.env;
    this.#durable = setup.durable;
    this.#initialStates = setup.initialStates;
    this.#runner = setup.runner(this);
    const { journal } = setup.durable;
    this.#hooks = {
      ...durableHooks(setup.durable),
      prior: (i) => {
        const held = this.#held.get(i);
        return held?.progress.entry?.status === 'running' ? { steps: held.progress.steps, inflight: held.progress.inflight } : undefined;
      },
      // The coordinator writes the run folder: a worker keeps no writer.
      initialState: () => undefined,
      settled: (step) => this.#forward(step),
      storeFailed: (err) => this.#fail(err),
      close: (record, finished) => this.#close(record, finished),
    };
    journal.onFailure = (err) => this.#fail(err);
    journal.onLeaseLost = (episode) => this.#leaseLost(episode);
    const unpublish = this.events.onAny((e) => this.#publish(e));
    const unwatch = watchStore(setup.durable, { clock: systemClock, waitMs: storeWaitMs, emit: (e) => this.events.emit(e), stopping: () => this.#failure !== undefined || this.#internal.signal.aborted, fail: (err) => this.#fail(err), resume: `agent run --resume ${this.runId} --store ${redactUrl(setup.durable.url)}` });
    const unforward = this.#env.events.onAny((e) => this.#forward(e));
    this.#detach = () => {
      unpublish();
      unwatch();
      unforward();
    };
  }

  /** Join run `runId` from its journal; undefined when Redis no longer has the run (it completed). */
  static async join(runId: string, options: JoinOptions): Promise<WorkerRun | undefined> {
    const redis = await openRedis(options.store, options.signal);
    redis.options.maxRetriesPerRequest = null;
    let env: AgentEnv | undefined;
    try {
      const journal = new FencedJournal(redis, runId, options.workerId);
      const saved = await journal.run(options.signal);
      if (!saved) {
        redis.disconnect();
        return undefined;
      }
      const { config } = saved;
      const envDir = await runEnvDir({ runId, env: config.env, envDir: saved.env_dir, ...(saved.env_fingerprint !== undefined ? { fingerprint: saved.env_fingerprint } : {}) }, options.envs, options.signal);
      const policy = await loadPolicy(config.policy);
      const store = new RedisStateStore(redis, { prefix: `agent:${runId}:`, snapshotEvery: 50, fence: (id) => journal.token(episodeOfInstance(id) ?? -1) }, true);
      // A traced run: this worker's calls carry the coordinator's trace context (the coordinator
      // builds the spans from the events this worker publishes; the ids agree by construction).
      const traceIds = config.trace_sampling !== undefined ? new RunTraceIds(runId, { ratio: config.trace_sampling }) : undefined;
      env = await AgentEnv.open(envDir, {
        seed: config.seed,
        clock: systemClock,
        store,
        watchEventLoop: true,
        ...(options.signal ? { signal: options.signal } : {}),
        ...(saved.tool_options ? { toolOptions: saved.tool_options } : {}),
        ...(saved.reward_sources ? { rewardSources: saved.reward_sources } : {}),
        ...(traceIds ? { traceparent: (traceId: string) => traceIds.traceparent(traceId) } : {}),
      });
      const opened = env;
      const initialStates = initialStatesOf(env.definition, config.seed);
      const runner = (run: WorkerRun): EpisodeRunner => new EpisodeRunner({ env: opened, policy, clock: systemClock, seed: config.seed, maxSteps: config.max_steps, initialStates, emit: (e) => run.events.emit(e), breathe: breather(() => undefined) });
      return new WorkerRun({ runId, env, durable: { url: options.store, redis, store, journal }, config, initialStates, runner }, options.storeWaitMs ?? DEFAULT_STORE_WAIT_MS);
    } catch (err) {
      await env?.[Symbol.asyncDispose]();
      redis.disconnect();
      throw err;
    }
  }

  /** Writes this worker made after losing a lease, refused by their fence. */
  get fencedWrites(): number {
    return this.#fencedWrites;
  }

  /** Whether this worker's part of the run stopped on a store failure (the worker lets the run go). */
  get failure(): AgentError | undefined {
    return this.#failure;
  }

  /**
   * Run one episode under the lease `token`: from its start, or from its last committed step when
   * another worker began it. Aborting `signal` (a hand-back, a lost lease) stops it as interrupted,
   * its progress kept for whoever takes it next.
   */
  async runEpisode(episode: number, token: number, signal: AbortSignal): Promise<WorkerEpisodeOutcome> {
    const { journal } = this.#durable;
    journal.hold(episode, token);
    using linked = linkedController(signal, this.#internal.signal);
    try {
      const progress = await journal.progress(episode, linked.signal);
      // Finished already: its last worker died before acknowledging it.
      if (progress.entry?.status === 'finished') return { reason: progress.entry.event.reason, steps: progress.entry.event.steps, leaseLost: false };
      const held: HeldEpisode = { controller: linked.controller, progress, leaseLost: false };
      this.#held.set(episode, held);
      const finished = await this.#runner.run(episode, this.#hooks, linked.signal);
      // Judges and reward models still working on its steps deliver before the worker acknowledges the episode.
      if (!linked.signal.aborted) await this.#env.rewards.settle(linked.signal, finished.instance_id);
      return { reason: finished.reason, steps: finished.steps, leaseLost: held.leaseLost };
    } finally {
      this.#held.delete(episode);
      journal.release(episode);
    }
  }

  /** End an episode that keeps killing its workers: finished as `worker_lost` with `error`, never run again. */
  async failEpisode(episode: number, token: number, error: ErrorInfo, signal?: AbortSignal): Promise<void> {
    const { journal, store } = this.#durable;
    journal.hold(episode, token);
    try {
      const { entry, steps } = await journal.progress(episode, signal);
      if (entry?.status === 'finished') return;
      const now = systemClock.now();
      const last = steps[steps.length - 1];
      const event: EpisodeFinishedEvent = { type: 'episode_finished', time: now, instance_id: `ep-${episode}`, episode, steps: last?.step ?? 0, reward: steps.reduce((sum, s) => sum + s.reward, 0), reason: 'worker_lost', duration_ms: 0, error };
      // It ends at its last committed step: deltas after it belong to the call that took the worker
      // down, and are dropped, so that the history the coordinator archives replays to the record.
      const stateIndex = this.#runner.stateIndex(episode);
      const initial = this.#initialStates[stateIndex] ?? null;
      const seq = last?.seq ?? 0;
      const bounds = await store.bounds(event.instance_id, signal);
      if (bounds && bounds.headSeq > seq) await store.rewind(event.instance_id, seq, signal);
      const final = bounds ? (await store.stateAt(event.instance_id, { seq }, signal)).state : initial;
      const record: EpisodeRecord = {
        episode,
        instance_id: event.instance_id,
        initial_state_id: `initial-${stateIndex}`,
        final_patch: diffStates(initial, final),
        final_seq: seq,
        steps: event.steps,
        reason: 'worker_lost',
        terminated: false,
        truncated: true,
        started_at: entry?.started_at ?? now,
        finished_at: now,
      };
      await journal.episodeFinished(episode, record, event, signal);
    } finally {
      journal.release(episode);
    }
  }

  /** The call in flight when the episode's last worker stopped, for the cause of a poisoned episode. */
  async inflightOf(episode: number, signal?: AbortSignal): Promise<InflightCall | undefined> {
    return (await this.#durable.journal.progress(episode, signal)).inflight;
  }

  /** Env events into the worker's stream; a settled step, committed, into the fenced journal (which puts it on the run's stream). */
  #forward(e: EnvEvent | SettledStepEvent): void {
    if (e.type !== 'trace_settled') return this.events.emit(e);
    // Stopping on a store failure: a step settling now was not committed. A call cancelled by a
    // hand-back or a lost lease is not committed either: whoever continues the episode re-runs it.
    if (this.#failure) return;
    if (this.#held.get(e.episode)?.controller.signal.aborted && e.error?.code === 'TOOL_CANCELLED') return;
    if (e.error?.code === 'LEASE_LOST') {
      // The state store refused the step's write: count it with the run's other refused writes.
      this.#durable.redis.hincrby(distributedKeys(this.runId).meta, 'fenced', 1).catch(() => undefined);
      this.#leaseLost(e.episode);
      return;
    }
    if (e.error && STORE_FAILURES.has(e.error.code)) {
      this.#fail(new AgentError(e.error.code as 'STORE_WRITES_LOST', e.error.message, e.error.hint ? { hint: e.error.hint } : {}));
      return;
    }
    const step = this.#runner.committed(e);
    this.#durable.journal.step(step).catch(() => undefined);
    this.events.emit(step);
  }

  /** An episode's end, journaled (fenced); its history stays in Redis for the coordinator to archive. */
  async #close(record: EpisodeRecord | undefined, finished: EpisodeFinishedEvent): Promise<boolean> {
    if (finished.reason === 'interrupted' || this.#failure) return false;
    try {
      await this.#durable.journal.episodeFinished(finished.episode, record, finished);
      return true;
    } catch (err) {
      if (isAgentError(err) && STORE_FAILURES.has(err.code)) this.#fail(err);
      return false;
    }
  }

  /** A write of `episode` was refused: stop working on it (its new holder continues it). */
  #leaseLost(episode: number): void {
    this.#fencedWrites++;
    const held = this.#held.get(episode);
    if (!held || held.leaseLost) return;
    held.leaseLost = true;
    held.controller.abort(new AgentError('LEASE_LOST', `the lease on episode ${episode} passed to another worker`));
  }

  /** This worker's events onto the run's stream (steps and episode ends go with their journal writes). */
  #publish(e: RunEvent): void {
    if (e.type === 'trace_settled' || e.type === 'episode_finished') return;
    const { journal } = this.#durable;
    const episode = 'episode' in e && typeof e.episode === 'number' ? e.episode : 'instance_id' in e && typeof e.instance_id === 'string' ? episodeOfInstance(e.instance_id) : undefined;
    if (episode === undefined || journal.token(episode) === undefined) return;
    journal.publish(episode, e);
  }

  /** Stop this worker's part of the run on a store failure (once): its episodes end interrupted and are taken again. */
  #fail(err: AgentError): void {
    if (this.#failure) return;
    this.#failure = err;
    this.#internal.abort(err);
    stopRetrying(this.#durable, err);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#detach();
    await this.#env[Symbol.asyncDispose]();
    await closeDurable(this.#durable);
  }
}

/** `ep-3` → 3 (the instance of an episode); undefined for other ids. */
function episodeOfInstance(instanceId: string): number | undefined {
  const m = /^ep-(\d+)$/.exec(instanceId);
  return m ? Number(m[1]) : undefined;
}
