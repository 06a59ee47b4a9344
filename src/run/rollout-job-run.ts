/**
 * A served run's rollouts as one worker takes part in them (`agent worker`, a claim of kind
 * `rollout`; see rollout-jobs.ts): the run's env opened here with a memory store, each request's
 * `llm:` agent built once (its inference server checked once per worker), every trainer
 * connection's weight version and pause followed from the run's channel, and each episode run whole,
 * its events and record collected for delivery. Nothing is written while an episode runs: a worker
 * that stops (drained, its lease lost, killed) leaves nothing of it, and whoever takes the episode
 * next runs it from its start.
 */
import type { Redis } from 'ioredis';
import { AgentEnv } from '../env/agent-env.js';
import type { EnvEvent } from '../events/env-events.js';
import type { RunEvent, SettledStepEvent } from '../events/run-events.js';
import { GenerationGate } from '../llm/generation-gate.js';
import type { TokenServers } from '../llm/token-chat.js';
import type { EpisodeRecord } from '../replay/run-writer.js';
import type { EpisodeFinishedEvent } from './run-journal.js';
import { raceAbort } from '../shared/abort.js';
import { systemClock } from '../shared/clock.js';
import { AgentError } from '../shared/errors.js';
import { errorInfo } from '../env/agent-instance.js';
import { runEnvDir } from './env-dirs.js';
import { breather, EpisodeRunner, type EpisodeHooks } from './episode-runner.js';
import type { LlmServingSettings } from './llm-agent.js';
import { withTask, type Policy } from './policy.js';
import { llmPolicy, type RunPolicy } from './policy-factory.js';
import { parseRolloutValue, rolloutKeys, type RolloutAgentSpec, type RolloutControl, type RolloutDelivery, type RolloutJob, type RolloutKeys, type RolloutRunMeta, type RolloutSignal } from './rollout-jobs.js';

export interface RolloutJoinOptions {
  /** The worker's command connection (a subscriber is opened beside it). */
  readonly redis: Redis;
  /** Folders holding the envs on this machine (default: the serving process's path). */
  readonly envs?: readonly string[];
  /** The worker's inference servers, each checked once for its life. */
  readonly tokenServers: TokenServers;
  readonly signal?: AbortSignal;
}

/** A request's agent is dropped once unused this long (its request has most likely ended). */
const AGENT_IDLE_MS = 60_000;

interface Collected {
  readonly events: RunEvent[];
  record?: EpisodeRecord;
  /** Aborted when the serving process cancels the episode (its request was cancelled, or its group is surplus). */
  readonly cancel: AbortController;
}

export class RolloutJobRun implements AsyncDisposable {
  readonly runId: string;
  readonly #keys: RolloutKeys;
  readonly #redis: Redis;
  readonly #subscriber: Redis;
  readonly #env: AgentEnv;
  readonly #runner: EpisodeRunner;
  readonly #hooks: EpisodeHooks;
  readonly #tokenServers: TokenServers;
  readonly #controls = new Map<string, { state: RolloutControl; readonly gate: GenerationGate }>();
  readonly #agents = new Map<string, { readonly agent: Promise<RunPolicy>; used: number }>();
  readonly #episodes = new Map<number, Collected>();
  readonly #detach: () => void;

  private constructor(runId: string, env: AgentEnv, meta: RolloutRunMeta, redis: Redis, subscriber: Redis, tokenServers: TokenServers) {
    this.runId = runId;
    this.#keys = rolloutKeys(runId);
    this.#env = env;
    this.#redis = redis;
    this.#subscriber = subscriber;
    this.#tokenServers = tokenServers;
    // The policy is each episode's (its request's agent, through the driver): the run's is never asked.
    const none: Policy = () => null;
    this.#runner = new EpisodeRunner({ env, policy: none, clock: systemClock, seed: meta.seed, maxSteps: meta.max_steps, initialStates: meta.initial_states, emit: (e) => this.#collect(e), breathe: breather(() => undefined) });
    this.#hooks = {
      // The serving process writes the run folder, the initial states included.
      initialState: () => undefined,
      settled: (step) => this.#collect(step),
      storeFailed: () => undefined,
      close: async (record, finished) => {
        const collected = this.#episodes.get(finished.episode);
        if (collected && record) collected.record = record;
        await env.store.drop(finished.instance_id);
        return true;
      },
    };
    const forward = (e: EnvEvent | SettledStepEvent): void => this.#collect(e.type === 'trace_settled' ? this.#runner.committed(e) : e);
    const unforward = env.events.onAny(forward);
    const onMessage = (_channel: string, text: string): void => this.#heard(text);
    subscriber.on('message', onMessage);
    this.#detach = () => {
      unforward();
      subscriber.off('message', onMessage);
    };
  }

  /** Completions held by a trainer's pause, on this worker. */
  get holding(): number {
    let n = 0;
    for (const c of this.#controls.values()) n += c.gate.waiting;
    return n;
  }

  /** Join the served run `runId`; undefined when Redis no longer has it (the serving process has ended). */
  static async join(runId: string, options: RolloutJoinOptions): Promise<RolloutJobRun | undefined> {
    const keys = rolloutKeys(runId);
    const text = await raceAbort(options.redis.get(keys.meta), options.signal);
    if (text === null) return undefined;
    const meta = parseRolloutValue<RolloutRunMeta>(text, keys.meta, ['env', 'env_dir', 'env_fingerprint', 'seed', 'max_steps', 'initial_states']);
    const dir = await runEnvDir({ runId, env: meta.env, envDir: meta.env_dir, fingerprint: meta.env_fingerprint }, options.envs, options.signal);
    const env = await AgentEnv.open(dir, {
      seed: meta.seed,
      clock: systemClock,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(meta.tool_options ? { toolOptions: meta.tool_options } : {}),
      ...(meta.reward_sources ? { rewardSources: meta.reward_sources } : {}),
    });
    const subscriber = options.redis.duplicate();
    subscriber.on('error', () => undefined);
    const run = new RolloutJobRun(runId, env, meta, options.redis, subscriber, options.tokenServers);
    try {
      // Subscribed before the controls are read: a change made between the two is not missed.
      await raceAbort(subscriber.subscribe(keys.channel), options.signal);
      const controls = await raceAbort(options.redis.hgetall(keys.controls), options.signal);
      for (const [id, state] of Object.entries(controls)) run.#control(id, parseRolloutValue<RolloutControl>(state, `${keys.controls} ${id}`, ['version', 'paused']));
      return run;
    } catch (err) {
      await run[Symbol.asyncDispose]();
      throw err;
    }
  }

  /**
   * Run episode `episode` whole: its end and its delivery (JSON), or undefined when the serving process no
   * longer waits for it (its job is gone). Rejects when `signal` aborts (the worker drains, the
   * lease was lost): nothing of the episode is kept.
   */
  async run(episode: number, signal: AbortSignal): Promise<{ readonly finished: EpisodeFinishedEvent; readonly payload: string } | undefined> {
    const job = await this.#job(episode, signal);
    if (!job) return undefined;
    const collected: Collected = { events: [], cancel: new AbortController() };
    this.#episodes.set(episode, collected);
    try {
      // Cancelled before it was here (a cancel heard from now on aborts it directly: it is in #episodes).
      if ((await raceAbort(this.#redis.sismember(this.#keys.cancelled, String(episode)), signal)) === 1) collected.cancel.abort();
      const agent = await this.#agent(job, signal).catch((err: unknown): RunPolicy => {
        signal.throwIfAborted();
        // The agent could not be built here (its inference server unreachable): the episode fails
        // with the reason, delivered like any other, so its group says why.
        const fail: Policy = () => {
          throw err;
        };
        return { policy: fail, record: { name: 'unavailable' }, ended: () => undefined };
      });
      const finished = await this.#runner.run(episode, this.#hooks, signal, { initialIndex: job.initial_index, policy: withTask(agent.policy, () => job.task), signal: collected.cancel.signal });
      agent.ended(episode);
      signal.throwIfAborted();
      // Judges and reward models still working on its steps deliver before the episode does (its own, not its siblings').
      await this.#env.rewards.settle(signal, finished.instance_id);
      const delivery: RolloutDelivery = { events: collected.events, ...(collected.record ? { record: collected.record } : {}) };
      return { finished, payload: JSON.stringify(delivery) };
    } finally {
      this.#episodes.delete(episode);
    }
  }

  /**
   * An episode whose workers died every time they ran it, given up: its delivery says so
   * (`worker_lost`, with `cause`), so that its group fails with the reason instead of waiting.
   */
  async giveUp(episode: number, cause: string, signal: AbortSignal): Promise<string | undefined> {
    const job = await this.#job(episode, signal);
    if (!job) return undefined;
    const time = Date.now();
    const instance = `ep-${episode}`;
    const error = errorInfo(new AgentError('WORKER_LOST', `episode ${episode} was given up: ${cause}`, { hint: 'Something in this episode takes its worker down (a tool, the memory it needs): run its task alone with agent run to see why.' }));
    const events: RunEvent[] = [
      { type: 'episode_started', time, instance_id: instance, episode, initial_state_id: `initial-${job.initial_index}` },
      { type: 'episode_finished', time, instance_id: instance, episode, steps: 0, reward: 0, reason: 'worker_lost', duration_ms: 0, error },
    ];
    return JSON.stringify({ events } satisfies RolloutDelivery);
  }

  async #job(episode: number, signal: AbortSignal): Promise<RolloutJob | undefined> {
    const text = await raceAbort(this.#redis.hget(this.#keys.jobs, String(episode)), signal);
    return text === null ? undefined : parseRolloutValue<RolloutJob>(text, `${this.#keys.jobs} ${episode}`, ['request', 'control', 'task', 'initial_index']);
  }

  /** A request's agent, built at its first episode here and kept while its episodes come. */
  async #agent(job: RolloutJob, signal: AbortSignal): Promise<RunPolicy> {
    const now = Date.now();
    for (const [id, held] of this.#agents) {
      if (now - held.used < AGENT_IDLE_MS) continue;
      this.#agents.delete(id);
      void held.agent.then((a) => a.dispose?.(), () => undefined);
    }
    let held = this.#agents.get(job.request);
    if (!held) {
      const agent = this.#buildAgent(job, signal);
      held = { agent, used: now };
      this.#agents.set(job.request, held);
      // A failed build is not kept: the next episode tries again.
      agent.catch(() => this.#agents.get(job.request) === held && this.#agents.delete(job.request));
    }
    held.used = now;
    return held.agent;
  }

  async #buildAgent(job: RolloutJob, signal: AbortSignal): Promise<RunPolicy> {
    const key = `${this.#keys.requests} ${job.request}`;
    const text = await raceAbort(this.#redis.hget(this.#keys.requests, job.request), signal);
    if (text === null) throw new Error(`${key} is gone from Redis: the request has ended`);
    const spec = parseRolloutValue<RolloutAgentSpec>(text, key, ['model', 'system', 'seed', 'base_url', 'temperature']);
    const control = this.#control(job.control);
    const llm: LlmServingSettings = {
      baseURL: spec.base_url,
      tokens: true,
      temperature: spec.temperature,
      ...(spec.top_p !== undefined ? { topP: spec.top_p } : {}),
      ...(spec.max_tokens !== undefined ? { maxTokens: spec.max_tokens } : {}),
      ...(spec.tool_parser !== undefined ? { toolParser: spec.tool_parser } : {}),
      ...(spec.max_context !== undefined ? { maxContext: spec.max_context } : {}),
      weightVersion: () => control.state.version ?? undefined,
      beforeGenerate: (s?: AbortSignal) => control.gate.pass(s),
      tokenServers: this.#tokenServers,
    };
    return llmPolicy(spec.model, `llm:${spec.model}`, { system: () => Promise.resolve(spec.system), seed: spec.seed, llm, signal });
  }

  /** A trainer connection's control, as last heard (`state`: a change). */
  #control(id: string, state?: RolloutControl): { state: RolloutControl; readonly gate: GenerationGate } {
    let control = this.#controls.get(id);
    if (!control) this.#controls.set(id, (control = { state: { version: null, paused: false }, gate: new GenerationGate() }));
    if (state) {
      control.state = state;
      if (state.paused) control.gate.pause();
      else control.gate.resume();
    }
    return control;
  }

  #heard(text: string): void {
    let signal: RolloutSignal;
    try {
      signal = JSON.parse(text) as RolloutSignal;
    } catch {
      return;
    }
    if ('cancel' in signal) {
      for (const episode of signal.cancel) this.#episodes.get(episode)?.cancel.abort();
    } else if (typeof signal.control === 'string') this.#control(signal.control, signal.state);
  }

  /** An event of one of this worker's episodes into its delivery; the env's other events are not the run's. */
  #collect(e: RunEvent): void {
    const episode = 'episode' in e && typeof e.episode === 'number' ? e.episode : 'instance_id' in e && typeof e.instance_id === 'string' && /^ep-\d+$/.test(e.instance_id) ? Number(e.instance_id.slice(3)) : undefined;
    if (episode !== undefined) this.#episodes.get(episode)?.events.push(e);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#detach();
    this.#subscriber.disconnect();
    for (const held of this.#agents.values()) await held.agent.then((a) => a.dispose?.(), () => undefined);
    this.#agents.clear();
    await this.#env[Symbol.asyncDispose]().catch(() => undefined);
  }
}
