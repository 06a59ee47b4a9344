/**
 * `agent worker` as a library: takes episodes of distributed runs from the queue in Redis, C at a
 * time, and runs them on the async core, committing to Redis under a fenced lease per episode. The
 * same queue carries the rollout episodes of `agent serve --workers` (rollout-job-run.ts): each run
 * whole, then delivered back under its lease.
 *
 * - A lease is renewed every third of its length; a worker that cannot renew (it lost the lease
 *   while paused, or Redis fenced one of its writes) stops the episode: its new holder continues
 *   it from the last committed step.
 * - An episode claimed more than `maxAttempts` times without committing a step in between (its
 *   workers died running it) is ended as `worker_lost` with the cause, not run again.
 * - Aborting `work`'s signal drains: no new claims, episodes in hand are interrupted and handed
 *   back at once (another worker continues them), then `work` returns.
 *
 * @example
 * const worker = await RolloutWorker.start({ store: 'redis://127.0.0.1:6379/0', concurrency: 8 });
 * worker.events.on('episode_done', (e) => console.log(e.runId, e.episode, e.reason));
 * await worker.work(controller.signal);
 */
import type { Redis } from 'ioredis';
import { hostname } from 'node:os';
import { errorInfo } from '../env/agent-instance.js';
import { Emitter } from '../shared/emitter.js';
import { AgentError, describeError, isAgentError, UsageError } from '../shared/errors.js';
import { sleep } from '../shared/abort.js';
import { openRedis, redactUrl } from '../state/redis-store.js';
import { DEFAULT_QUEUE, EpisodeQueue, workerId, type Claim } from './episode-queue.js';
import type { EpisodeEndReason, RunEvent } from '../events/run-events.js';
import { WorkerRun } from './worker-run.js';
import { RolloutJobRun } from './rollout-job-run.js';
import { rolloutKeys } from './rollout-jobs.js';
import type { EpisodeFinishedEvent } from './run-journal.js';
import { TokenServers } from '../llm/token-chat.js';
import { WORKER_DEFAULTS } from '../shared/defaults.js';

/** What a rollout worker connects to (the Redis store, the queue), how many episodes it runs at once, which env folders it accepts, and its lease and retry limits. */
export interface WorkerOptions {
  /** `redis://host:port/db`: the Redis of the runs to work on. */
  readonly store: string;
  /** The queue to take episodes from (`agent:queue`): a coordinator's `--queue`. */
  readonly queue?: string;
  /** Episodes in hand at once (default 4). */
  readonly concurrency?: number;
  /** Folders holding the envs on this machine (default: the path the coordinator recorded). */
  readonly envs?: readonly string[];
  /** How long an episode stays this worker's without a renewal (default 10 s): a dead worker's episodes wait this long. */
  readonly leaseMs?: number;
  /** Claims of one episode without a step committed in between before it is given up as `worker_lost` (default 3). */
  readonly maxAttempts?: number;
  /** How long to wait for an unreachable Redis before giving a run up (default 60 s). */
  readonly storeWaitMs?: number;
  readonly id?: string;
  readonly signal?: AbortSignal;
}

/** What a rollout worker emits: an episode claimed, done, handed back, its lease lost, given up after its attempts, and problems. */
export type WorkerEvent =
  | { readonly type: 'claimed'; readonly runId: string; readonly episode: number; readonly attempts: number; readonly previousOwner?: string }
  | { readonly type: 'episode_done'; readonly runId: string; readonly episode: number; readonly reason: EpisodeEndReason; readonly steps: number }
  | { readonly type: 'handed_back'; readonly runId: string; readonly episode: number }
  | { readonly type: 'lease_lost'; readonly runId: string; readonly episode: number }
  | { readonly type: 'given_up'; readonly runId: string; readonly episode: number; readonly attempts: number; readonly cause: string }
  | { readonly type: 'problem'; readonly runId?: string; readonly message: string };

/** A worker's totals when it stops: episodes finished, handed back, leases lost, given up, and writes its fence refused. */
export interface WorkerSummary {
  readonly id: string;
  readonly finished: number;
  readonly handedBack: number;
  readonly leasesLost: number;
  readonly givenUp: number;
  /** Writes refused by a fence after this worker lost a lease. */
  readonly fencedWrites: number;
}

const HEARTBEAT_MS = 1_000;
/** A run with no episode here for this long is left: it has most likely completed. */
const RUN_IDLE_MS = 30_000;
const CLAIM_BLOCK_MS = 1_000;

/** Takes episodes of distributed runs from the Redis queue, runs them with the run's env and policy, and commits every step through a fenced journal. */
export class RolloutWorker {
  readonly id: string;
  readonly events = new Emitter<WorkerEvent>();
  /** Who hears the events of every run this worker joins (its metrics). */
  readonly #runListeners = new Set<(runId: string, event: RunEvent) => void>();
  readonly #runUnsubscribes = new Map<string, () => void>();
  readonly #options: WorkerOptions;
  readonly #redis: Redis;
  readonly #blocking: Redis;
  readonly #queue: EpisodeQueue;
  readonly #concurrency: number;
  readonly #leaseMs: number;
  readonly #maxAttempts: number;
  /** Runs this worker has joined (a promise: concurrent claims of one run join it once). */
  readonly #runs = new Map<string, Promise<WorkerRun | undefined>>();
  /** Served runs whose rollout episodes this worker runs (rollout-job-run.ts), joined once each. */
  readonly #rollouts = new Map<string, Promise<RolloutJobRun | undefined>>();
  /** Those joined, once joined (for what they hold now). */
  readonly #joinedRollouts = new Set<RolloutJobRun>();
  /** The inference servers this worker's rollout agents use, each checked once for the worker's life. */
  readonly #tokenServers = new TokenServers();
  /** When each joined run last had an episode here: a run idle for long is left (its env and connection closed). */
  readonly #lastUsed = new Map<string, number>();
  /** Runs whose env differs from this worker's (ENV_MISMATCH), told to their coordinator by the heartbeat. */
  readonly #mismatched = new Set<string>();
  /** Fenced writes of runs already left. */
  #fencedOfLeft = 0;
  readonly #inHand = new Map<string, { readonly claim: Claim; readonly controller: AbortController; lost: boolean }>();
  /** Aborted when the worker starts draining (its waits end early). */
  readonly #stopping = new AbortController();
  #counts = { finished: 0, handedBack: 0, leasesLost: 0, givenUp: 0 };
  #wake: (() => void) | undefined;

  private constructor(options: WorkerOptions, redis: Redis, blocking: Redis, id: string) {
    this.#options = options;
    this.#redis = redis;
    this.#blocking = blocking;
    this.id = id;
    this.#queue = new EpisodeQueue(redis, options.queue ?? DEFAULT_QUEUE);
    this.#concurrency = options.concurrency ?? WORKER_DEFAULTS.concurrency;
    this.#leaseMs = options.leaseMs ?? WORKER_DEFAULTS.leaseMs;
    this.#maxAttempts = options.maxAttempts ?? WORKER_DEFAULTS.maxAttempts;
  }

  /** Check the options and connect (a wrong URL fails here, naming it). */
  static async start(options: WorkerOptions): Promise<RolloutWorker> {
    for (const [name, v, min] of [['concurrency', options.concurrency, 1], ['max-attempts', options.maxAttempts, 1]] as const) {
      if (v !== undefined && (!Number.isInteger(v) || v < min)) throw new UsageError(`${name} must be a whole number ≥ ${min} (got ${v})`);
    }
    if (options.leaseMs !== undefined && !(options.leaseMs >= 300)) throw new UsageError(`lease must be at least 300 ms (got ${options.leaseMs} ms)`, 'Pass --lease 10s (a dead worker\'s episodes wait this long; renewals go every third of it).');
    if (!/^rediss?:\/\//.test(options.store)) throw new UsageError(`'${options.store}' is not a Redis URL`, 'Pass --store redis://host:port/db (or set AGENT_STORE), the Redis of the coordinator.');
    const redis = await openRedis(options.store, options.signal, 'agent-worker');
    // Commands wait while Redis restarts (the run's writes are fenced and numbered: a resend is safe).
    redis.options.maxRetriesPerRequest = null;
    const blocking = redis.duplicate();
    blocking.on('error', () => undefined);
    const worker = new RolloutWorker(options, redis, blocking, options.id ?? workerId());
    try {
      await worker.#queue.ensure(options.signal);
    } catch (err) {
      redis.disconnect();
      blocking.disconnect();
      throw err;
    }
    return worker;
  }

  /** Connected and taking episodes (a readiness probe's answer). */
  get ready(): boolean {
    return !this.#stopping.signal.aborted && this.#redis.status === 'ready';
  }

  get running(): number {
    return this.#inHand.size;
  }

  /** Completions of served runs' rollouts held here by their trainer's pause (released on its resume). */
  get holding(): number {
    let n = 0;
    for (const run of this.#joinedRollouts) n += run.holding;
    return n;
  }

  /** Take and run episodes until `signal` aborts; then hand back what is in hand and return. */
  async work(signal: AbortSignal): Promise<WorkerSummary> {
    const beat = setInterval(() => void this.#heartbeat(), HEARTBEAT_MS);
    const renew = setInterval(() => void this.#renewAll(), Math.max(100, Math.floor(this.#leaseMs / 3)));
    const onAbort = (): void => this.#drain();
    signal.addEventListener('abort', onAbort, { once: true });
    const episodes = new Set<Promise<void>>();
    try {
      await this.#heartbeat();
      while (!signal.aborted) {
        if (this.#inHand.size >= this.#concurrency) {
          await new Promise<void>((resolve) => (this.#wake = resolve));
          continue;
        }
        let claims: Claim[];
        try {
          claims = await this.#queue.claim(this.id, { count: this.#concurrency - this.#inHand.size, leaseMs: this.#leaseMs, blockMs: CLAIM_BLOCK_MS, blocking: this.#blocking, signal });
        } catch (err) {
          if (signal.aborted) break;
          this.events.emit({ type: 'problem', message: `taking episodes from ${redactUrl(this.#options.store)} failed: ${describeError(err)}; retrying` });
          await sleep(1_000, signal).catch(() => undefined);
          continue;
        }
        for (const claim of claims) {
          if (signal.aborted) {
            // Claimed as the drain began: give it straight back.
            await this.#queue.handBack(claim).catch(() => undefined);
            continue;
          }
          const p = this.#take(claim).finally(() => {
            episodes.delete(p);
            this.#wake?.();
          });
          episodes.add(p);
        }
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      this.#drain();
      await Promise.all(episodes);
      clearInterval(beat);
      clearInterval(renew);
      await this.#queue.leave(this.id).catch(() => undefined);
    }
    return { id: this.id, ...this.#counts, fencedWrites: await this.#fencedWrites() };
  }

  /** Stop claiming; interrupt the episodes in hand (each is handed back as it stops). */
  #drain(): void {
    this.#stopping.abort();
    for (const held of this.#inHand.values()) held.controller.abort(new AgentError('INTERRUPTED', 'the worker is shutting down; the episode is handed back'));
    this.#wake?.();
  }

  async #take(claim: Claim): Promise<void> {
    const key = `${claim.runId}/${claim.episode}`;
    this.events.emit({ type: 'claimed', runId: claim.runId, episode: claim.episode, attempts: claim.attempts, ...(claim.previousOwner ? { previousOwner: claim.previousOwner } : {}) });
    // In hand (renewed) from now: joining a run the first time loads its env, which takes a while.
    const held = { claim, controller: new AbortController(), lost: false };
    this.#inHand.set(key, held);
    this.#lastUsed.set(claim.runId, Date.now());
    try {
      if (claim.kind === 'rollout') return await this.#rollout(claim, held);
      const run = await this.#run(claim.runId);
      if (run === 'gone') {
        // The run is gone from Redis (it completed, or its keys were removed): nothing to do for it.
        await this.#queue.ack(claim).catch(() => undefined);
        return;
      }
      if (!run) {
        // Joining failed (the worker is draining, or the env does not load here): someone else may run it.
        await sleep(1_000, this.#stopping.signal).catch(() => undefined);
        await this.#handBack(claim);
        return;
      }
      if (claim.attempts > this.#maxAttempts) return await this.#giveUp(run, claim);
      if (held.controller.signal.aborted) return await this.#handBack(claim);
      const outcome = await run.runEpisode(claim.episode, claim.token, held.controller.signal);
      if (outcome.leaseLost || held.lost) {
        this.#counts.leasesLost++;
        this.events.emit({ type: 'lease_lost', runId: claim.runId, episode: claim.episode });
      } else if (outcome.reason === 'interrupted') {
        if (this.#stopping.signal.aborted) await this.#handBack(claim);
        // Otherwise the run stopped on a store failure: the lease lapses and another worker (or this one) takes it again.
        if (run.failure) this.#forget(claim.runId, run, run.failure.message);
      } else if (await this.#queue.ack(claim).catch(() => false)) {
        this.#counts.finished++;
        this.events.emit({ type: 'episode_done', runId: claim.runId, episode: claim.episode, reason: outcome.reason, steps: outcome.steps });
      }
    } catch (err) {
      // Stopped before it started (draining while reading its progress): hand it back like any other.
      if (this.#stopping.signal.aborted && !held.lost) await this.#handBack(claim);
      else this.events.emit({ type: 'problem', runId: claim.runId, message: `episode ${claim.episode}: ${describeError(err)}` });
    } finally {
      this.#inHand.delete(key);
      this.#lastUsed.set(claim.runId, Date.now());
    }
  }

  /** A served run's rollout episode: run whole here, and delivered in the same step as its entry leaves the queue (fenced by the lease). */
  async #rollout(claim: Claim, held: { readonly controller: AbortController; lost: boolean }): Promise<void> {
    const run = await this.#join(this.#rollouts, claim.runId, async () => {
      const joined = await RolloutJobRun.join(claim.runId, { redis: this.#redis, tokenServers: this.#tokenServers, ...(this.#options.envs ? { envs: this.#options.envs } : {}), ...(this.#options.signal ? { signal: this.#options.signal } : {}) });
      if (joined) this.#joinedRollouts.add(joined);
      return joined;
    });
    if (run === 'gone') return void (await this.#queue.ack(claim).catch(() => undefined));
    if (!run) {
      await sleep(1_000, this.#stopping.signal).catch(() => undefined);
      return this.#handBack(claim);
    }
    const signal = held.controller.signal;
    let done: { readonly finished: EpisodeFinishedEvent; readonly payload: string } | undefined;
    try {
      if (claim.attempts > this.#maxAttempts) {
        const cause = `its worker stopped ${claim.attempts - 1} times running it (the last: ${claim.previousOwner ?? 'unknown'})`;
        const payload = await run.giveUp(claim.episode, cause, signal);
        if (payload !== undefined && (await this.#queue.deliver(claim, rolloutKeys(claim.runId).results, payload))) {
          this.#counts.givenUp++;
          this.events.emit({ type: 'given_up', runId: claim.runId, episode: claim.episode, attempts: claim.attempts - 1, cause });
        }
        return;
      }
      done = await run.run(claim.episode, signal);
    } catch (err) {
      if (held.lost) {
        this.#counts.leasesLost++;
        this.events.emit({ type: 'lease_lost', runId: claim.runId, episode: claim.episode });
      } else if (this.#stopping.signal.aborted) await this.#handBack(claim);
      else throw err;
      return;
    }
    // Its job is gone: the serving process no longer waits for it.
    if (!done) return void (await this.#queue.ack(claim).catch(() => undefined));
    if (await this.#queue.deliver(claim, rolloutKeys(claim.runId).results, done.payload)) {
      this.#counts.finished++;
      this.events.emit({ type: 'episode_done', runId: claim.runId, episode: claim.episode, reason: done.finished.reason, steps: done.finished.steps });
    } else {
      this.#counts.leasesLost++;
      this.events.emit({ type: 'lease_lost', runId: claim.runId, episode: claim.episode });
    }
  }

  async #handBack(claim: Claim): Promise<void> {
    if (!(await this.#queue.handBack(claim).catch(() => false))) return;
    this.#counts.handedBack++;
    this.events.emit({ type: 'handed_back', runId: claim.runId, episode: claim.episode });
  }

  /** Joined once per run: 'gone' when Redis no longer has it, undefined when it failed to load (reported). */
  async #run(runId: string): Promise<WorkerRun | 'gone' | undefined> {
    const { store, envs, storeWaitMs, signal } = this.#options;
    const run = await this.#join(this.#runs, runId, () => WorkerRun.join(runId, { store, workerId: this.id, ...(envs ? { envs } : {}), ...(storeWaitMs !== undefined ? { storeWaitMs } : {}), ...(signal ? { signal } : {}) }));
    if (run instanceof WorkerRun && !this.#runUnsubscribes.has(runId)) this.#runUnsubscribes.set(runId, run.events.onAny((e) => this.#runListeners.forEach((l) => l(runId, e))));
    return run;
  }

  /** A run joined once for all its claims: 'gone' when Redis no longer has it, undefined when joining failed (reported; the claim goes back). */
  async #join<R>(runs: Map<string, Promise<R | undefined>>, runId: string, join: () => Promise<R | undefined>): Promise<R | 'gone' | undefined> {
    let joining = runs.get(runId);
    if (!joining) runs.set(runId, (joining = join()));
    try {
      const run = await joining;
      if (!run) runs.delete(runId);
      this.#mismatched.delete(runId);
      return run ?? 'gone';
    } catch (err) {
      if (runs.get(runId) === joining) runs.delete(runId);
      if (isAgentError(err) && err.code === 'ENV_MISMATCH' && !this.#mismatched.has(runId)) {
        this.#mismatched.add(runId);
        void this.#heartbeat();
      }
      if (!this.#stopping.signal.aborted) this.events.emit({ type: 'problem', runId, message: `cannot join run ${runId}: ${describeError(err)}` });
      return undefined;
    }
  }

  #forget(runId: string, run: WorkerRun, why: string): void {
    if (this.#runs.get(runId) === undefined) return;
    this.events.emit({ type: 'problem', runId, message: `left run ${runId}: ${why}` });
    this.#leave(runId, run);
  }

  /** Hears the events of every run this worker joins, with the run's id; returns the unsubscribe. */
  onRunEvent(listener: (runId: string, event: RunEvent) => void): () => void {
    this.#runListeners.add(listener);
    return () => void this.#runListeners.delete(listener);
  }

  #leave(runId: string, run: WorkerRun): void {
    this.#runUnsubscribes.get(runId)?.();
    this.#runUnsubscribes.delete(runId);
    this.#runs.delete(runId);
    this.#lastUsed.delete(runId);
    this.#fencedOfLeft += run.fencedWrites;
    void run[Symbol.asyncDispose]().catch(() => undefined);
  }

  /** Leave the runs that have had no episode here for a while (completed ones, mostly). */
  async #leaveIdleRuns(): Promise<void> {
    const busy = new Set([...this.#inHand.values()].map((h) => h.claim.runId));
    for (const [runId, joining] of [...this.#rollouts]) {
      if (busy.has(runId) || Date.now() - (this.#lastUsed.get(runId) ?? Date.now()) < RUN_IDLE_MS) continue;
      this.#rollouts.delete(runId);
      this.#lastUsed.delete(runId);
      void joining.then((run) => {
        if (run) this.#joinedRollouts.delete(run);
        return run?.[Symbol.asyncDispose]();
      }, () => undefined);
    }
    for (const [runId, joining] of [...this.#runs]) {
      if (busy.has(runId) || Date.now() - (this.#lastUsed.get(runId) ?? Date.now()) < RUN_IDLE_MS) continue;
      const run = await joining.catch(() => undefined);
      if (run && this.#runs.get(runId) === joining && !busy.has(runId)) this.#leave(runId, run);
    }
  }

  async #giveUp(run: WorkerRun, claim: Claim): Promise<void> {
    const inflight = await run.inflightOf(claim.episode).catch(() => undefined);
    const lost = claim.attempts - 1;
    const cause = `its worker stopped ${lost === 1 ? 'once' : `${lost} times`} without committing a step in between (the last: ${claim.previousOwner ?? 'unknown'})${inflight ? `; the call in flight was ${inflight.action} ${JSON.stringify(inflight.params)}` : ''}`;
    const error = errorInfo(new AgentError('WORKER_LOST', `episode ${claim.episode} was given up: ${cause}`, { hint: 'A tool crashes or hangs its worker on this episode: run it alone with agent run --episodes … to see why.' }));
    try {
      await run.failEpisode(claim.episode, claim.token, error);
      await this.#queue.ack(claim);
      this.#counts.givenUp++;
      this.events.emit({ type: 'given_up', runId: claim.runId, episode: claim.episode, attempts: claim.attempts - 1, cause });
    } catch (err) {
      this.events.emit({ type: 'problem', runId: claim.runId, message: `giving up episode ${claim.episode} failed: ${describeError(err)}` });
    }
  }

  async #renewAll(): Promise<void> {
    await Promise.all(
      [...this.#inHand.values()].map(async (held) => {
        const kept = await this.#queue.renew(this.id, held.claim).catch(() => true);
        if (kept || held.lost) return;
        held.lost = true;
        held.controller.abort(new AgentError('LEASE_LOST', `the lease on episode ${held.claim.episode} passed to another worker`));
      }),
    );
  }

  async #fencedWrites(): Promise<number> {
    let n = this.#fencedOfLeft;
    for (const joining of this.#runs.values()) n += (await joining.catch(() => undefined))?.fencedWrites ?? 0;
    return n;
  }

  async #heartbeat(): Promise<void> {
    await this.#leaveIdleRuns();
    await this.#queue
      .heartbeat({ id: this.id, host: hostname(), pid: process.pid, concurrency: this.#concurrency, running: this.#inHand.size, finished: this.#counts.finished, fenced: await this.#fencedWrites(), ...(this.#mismatched.size > 0 ? { mismatched: [...this.#mismatched] } : {}), at: Date.now() })
      .catch(() => undefined);
  }

  /** Leave every run and close the connections. */
  async [Symbol.asyncDispose](): Promise<void> {
    for (const joining of [...this.#runs.values(), ...this.#rollouts.values()]) await (await joining.catch(() => undefined))?.[Symbol.asyncDispose]();
    this.#runs.clear();
    this.#rollouts.clear();
    this.#joinedRollouts.clear();
    this.#redis.disconnect();
    this.#blocking.disconnect();
  }
}
