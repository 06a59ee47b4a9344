/**
 * `agent serve --workers`: a served run's rollout episodes run on `agent worker`s (the protocol is
 * run/rollout-jobs.ts). The serving process numbers each episode, puts its job and an entry on the
 * queue, and waits for its delivery on the run's results stream: the worker's events go into the
 * run as committed (folder, live view, metrics, the request's collectors), in their order, and the
 * groups are assembled and sent here as for local episodes. Weight versions and pause reach the
 * workers through the run's channel; a cancelled episode is taken off the queue when no worker has
 * it yet, else its worker is told and ends it `client_closed`.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { EpisodeQueue, DEFAULT_QUEUE } from '../run/episode-queue.js';
import type { EpisodeFinishedEvent } from '../run/run-journal.js';
import { parseRolloutValue, rolloutKeys, type RolloutAgentSpec, type RolloutControl, type RolloutDelivery, type RolloutJob, type RolloutKeys, type RolloutRunMeta, type RolloutSignal } from '../run/rollout-jobs.js';
import type { EpisodeLauncher } from '../run/scheduler.js';
import type { ElsewhereEpisode } from '../run/session-scheduler.js';
import { raceAbort, sleep } from '../shared/abort.js';
import { AgentError, describeError } from '../shared/errors.js';
import { openRedis } from '../state/redis-store.js';

/** Where a serving process's rollout episodes go: the workers' Redis and queue. */
export interface WorkersOptions {
  /** `redis://host:port/db`: the Redis the workers take episodes from. */
  readonly store: string;
  /** Their queue (default `agent:queue`). */
  readonly queue?: string;
  /** A cancelled episode no worker answers for this long is ended here (its workers are gone), default 10 s. */
  readonly cancelGraceMs?: number;
}

/** What the rollouts need of the workers (rollouts.ts). */
export interface RolloutWorkers {
  /** A request's agent, for its episodes' workers; `release` once the request has ended. */
  agent(spec: RolloutAgentSpec, signal: AbortSignal): Promise<{ readonly id: string; release(): Promise<void> }>;
  /** A trainer connection's weights and pause changed: its workers follow. */
  tell(control: string, state: RolloutControl): void;
  /** Episode `index`'s run elsewhere: its job onto the queue, its delivery into the run (see `SessionScheduler.elsewhere`). */
  episode(job: RolloutJob, signal: AbortSignal, begin: (index: number) => void): ElsewhereEpisode;
}

interface Pending {
  readonly launcher: Pick<EpisodeLauncher, 'committed' | 'ended'>;
  readonly resolve: (finished: EpisodeFinishedEvent) => void;
  readonly reject: (err: unknown) => void;
}

export class RemoteRollouts implements RolloutWorkers, AsyncDisposable {
  readonly #redis: Redis;
  readonly #reader: Redis;
  readonly #queue: EpisodeQueue;
  readonly #runId: string;
  readonly #keys: RolloutKeys;
  readonly #graceMs: number;
  readonly #pending = new Map<number, Pending>();
  readonly #closing = new AbortController();
  readonly #reading: Promise<void>;

  private constructor(redis: Redis, runId: string, options: WorkersOptions) {
    this.#redis = redis;
    this.#reader = redis.duplicate();
    this.#reader.on('error', () => undefined);
    this.#queue = new EpisodeQueue(redis, options.queue ?? DEFAULT_QUEUE);
    this.#runId = runId;
    this.#keys = rolloutKeys(runId);
    this.#graceMs = options.cancelGraceMs ?? 10_000;
    this.#reading = this.#read();
  }

  /** Connect, and publish the run for the workers (a resumed run's leftover jobs and deliveries go: nothing waits for them). */
  static async open(runId: string, meta: RolloutRunMeta, options: WorkersOptions, signal?: AbortSignal): Promise<RemoteRollouts> {
    const redis = await openRedis(options.store, signal, 'agent-serve-rollouts');
    try {
      const k = rolloutKeys(runId);
      await raceAbort(redis.del(k.jobs, k.results, k.cancelled), signal);
      await raceAbort(redis.set(k.meta, JSON.stringify(meta)), signal);
      await new EpisodeQueue(redis, options.queue ?? DEFAULT_QUEUE).ensure(signal);
    } catch (err) {
      redis.disconnect();
      throw err;
    }
    return new RemoteRollouts(redis, runId, options);
  }

  async agent(spec: RolloutAgentSpec, signal: AbortSignal): Promise<{ readonly id: string; release(): Promise<void> }> {
    const id = randomUUID();
    await raceAbort(this.#redis.hset(this.#keys.requests, id, JSON.stringify(spec)), signal);
    return { id, release: async () => void (await this.#redis.hdel(this.#keys.requests, id).catch(() => undefined)) };
  }

  tell(control: string, state: RolloutControl): void {
    const text = JSON.stringify(state);
    void this.#redis
      .multi()
      .hset(this.#keys.controls, control, text)
      .publish(this.#keys.channel, JSON.stringify({ control, state } satisfies RolloutSignal))
      .exec()
      .catch(() => undefined);
  }

  episode(job: RolloutJob, signal: AbortSignal, begin: (index: number) => void): ElsewhereEpisode {
    return async (index, launcher, runSignal) => {
      begin(index);
      const delivered = new Promise<EpisodeFinishedEvent>((resolve, reject) => this.#pending.set(index, { launcher, resolve, reject }));
      const cancelled = AbortSignal.any([signal, runSignal, this.#closing.signal]);
      let onCancel: (() => void) | undefined;
      try {
        await raceAbort(this.#redis.hset(this.#keys.jobs, String(index), JSON.stringify(job)), cancelled);
        const entryId = await this.#queue.addRollout(this.#runId, index, cancelled);
        onCancel = () => void this.#cancel(index, entryId, job);
        if (cancelled.aborted) onCancel();
        else cancelled.addEventListener('abort', onCancel, { once: true });
        return await delivered;
      } catch (err) {
        // Not on the queue (the request was cancelled first, Redis refused): it ends here, never started.
        if (!this.#pending.has(index)) return delivered;
        this.#endHere(index, job, 'client_closed', err);
        return await delivered;
      } finally {
        if (onCancel) cancelled.removeEventListener('abort', onCancel);
        this.#pending.delete(index);
        void this.#redis.multi().hdel(this.#keys.jobs, String(index)).srem(this.#keys.cancelled, String(index)).exec().catch(() => undefined);
      }
    };
  }

  /** A cancelled episode: off the queue when no worker has it (ended here), else its worker told; ended here if none answers in time. */
  async #cancel(index: number, entryId: string, job: RolloutJob): Promise<void> {
    try {
      await this.#redis.sadd(this.#keys.cancelled, String(index));
      await this.#redis.publish(this.#keys.channel, JSON.stringify({ cancel: [index] } satisfies RolloutSignal));
      if (await this.#queue.withdraw(this.#runId, index, entryId)) return this.#endHere(index, job, 'client_closed');
    } catch {
      // Redis away: the grace below ends it.
    }
    await sleep(this.#graceMs, this.#closing.signal).catch(() => undefined);
    this.#endHere(index, job, 'client_closed');
  }

  /** Ends an episode that no worker will deliver: it started and ended here, with no step. */
  #endHere(index: number, job: RolloutJob, reason: 'client_closed', err?: unknown): void {
    const time = Date.now();
    const instance = `ep-${index}`;
    const error = err === undefined ? undefined : { code: 'INTERRUPTED', message: describeError(err) };
    this.#apply(index, {
      events: [
        { type: 'episode_started', time, instance_id: instance, episode: index, initial_state_id: `initial-${job.initial_index}` },
        { type: 'episode_finished', time, instance_id: instance, episode: index, steps: 0, reward: 0, reason, duration_ms: 0, ...(error ? { error } : {}) },
      ],
    });
  }

  /** A delivery into the run, in order: its events committed, then its record; the episode's wait resolves. Once per episode. */
  #apply(index: number, delivery: RolloutDelivery): void {
    const pending = this.#pending.get(index);
    if (!pending) return;
    this.#pending.delete(index);
    const finished = delivery.events.find((e): e is EpisodeFinishedEvent => e.type === 'episode_finished' && e.episode === index);
    if (!finished) return pending.reject(new AgentError('STATE_CORRUPT', `the delivery of episode ${index} has no episode_finished event`, { hint: 'A worker of another version delivered it: run agent worker of the same version as agent serve.' }));
    for (const e of delivery.events) pending.launcher.committed(e);
    pending.launcher.ended(finished, delivery.record);
    pending.resolve(finished);
  }

  /** Reads the deliveries as they come, until closed. */
  async #read(): Promise<void> {
    let from = '0';
    const closing = this.#closing.signal;
    while (!closing.aborted) {
      let batch: [string, [string, string[]][]][] | null;
      try {
        batch = (await raceAbort(this.#reader.xread('COUNT', 100, 'BLOCK', 1_000, 'STREAMS', this.#keys.results, from), closing)) as typeof batch;
      } catch {
        // Redis away: try again (each delivery stays on the stream until read).
        await sleep(250, closing).catch(() => undefined);
        continue;
      }
      const read: string[] = [];
      for (const [, entries] of batch ?? []) {
        for (const [id, fields] of entries) {
          from = id;
          read.push(id);
          const episode = Number(fields[fields.indexOf('episode') + 1]);
          const at = fields.indexOf('result');
          if (at < 0 || !this.#pending.has(episode)) continue;
          try {
            this.#apply(episode, parseRolloutValue<RolloutDelivery>(fields[at + 1] ?? '', `${this.#keys.results} ${id}`, ['events']));
          } catch (err) {
            this.#pending.get(episode)?.reject(err);
          }
        }
      }
      if (read.length > 0) await this.#redis.xdel(this.#keys.results, ...read).catch(() => undefined);
    }
  }

  /** Stops reading; the run's keys of the rollouts go (workers leave it when they find its meta gone). */
  async [Symbol.asyncDispose](): Promise<void> {
    this.#closing.abort();
    await this.#reading;
    for (const p of this.#pending.values()) p.reject(new AgentError('INTERRUPTED', 'the server is stopping'));
    this.#pending.clear();
    const k = this.#keys;
    await this.#redis.del(k.meta, k.requests, k.jobs, k.controls, k.cancelled, k.results).catch(() => undefined);
    await this.#queue.retire(this.#runId).catch(() => undefined);
    this.#reader.disconnect();
    this.#redis.disconnect();
  }
}
