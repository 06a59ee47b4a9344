/**
 * Rollouts as a service: a trainer asks `agent serve` for K episodes of each of some tasks, run in
 * the runtime by an `llm:` policy in token mode against the trainer's inference server, and gets
 * each task's group as soon as its K episodes are over and every reward they await has landed (or
 * been imputed at its deadline): the token records of `agent export --format tokens`, streamed.
 *
 * Weight versions: every turn is labelled with the weights it was generated with (the server's
 * own report, else the version the trainer last declared). A group whose oldest turn is more than
 * `max_staleness` versions behind the newest known when it completes is re-run (`stale: "rerun"`,
 * at most `SERVE_DEFAULTS.staleReruns` times) or dropped (`stale: "drop"`), counted in the summary; it is
 * never sent mixed in silently. The staleness counts from the group's oldest turn, or from its newest
 * (`staleness_from: "newest"`): episodes in flight across a weight update are not cancelled, their
 * next turns use the new weights, and every turn keeps its own version (partial rollouts).
 *
 * Dynamic sampling: a group whose rewards are all equal (`filter: "zero_variance"`) or whose mean is
 * outside [`min_reward`, `max_reward`] is not sent, and counted. A request can ask for `groups: N`
 * drawn from a pool (`task_ids`) by the server's curriculum (task-curriculum.ts): a filtered,
 * dropped or failed group is replaced by another draw until N are sent (at most `max_tries`
 * groups started); `oversample` runs more at once and cancels the surplus when N are in.
 *
 * The episodes are the run's like any other (run folder, events, debug views, export); a request
 * that is cancelled, or whose client goes away, ends its episodes `client_closed`.
 */
import { truncatedBy, type EpisodeDriver } from '../run/episode-runner.js';
import type { EpisodeFinishedEvent } from '../run/run-journal.js';
import type { RunEvent } from '../events/run-events.js';
import type { ErrorInfo } from '../events/env-events.js';
import { withTask, type Policy } from '../run/policy.js';
import { llmPolicy, programPolicy, type PolicySetup } from '../run/policy-factory.js';
import type { ElsewhereEpisode } from '../run/session-scheduler.js';
import type { RolloutWorkers } from './remote-rollouts.js';
import { episodeTokenRecords, type TokenRecord } from '../replay/token-export.js';
import { AgentError } from '../shared/errors.js';
import { raceAbort } from '../shared/abort.js';
import { SERVE_DEFAULTS } from '../shared/defaults.js';
import { cleanSum } from '../shared/float-sum.js';
import type { ServedTask } from './served-episode.js';
import type { GenerationGate } from '../llm/generation-gate.js';
import type { TokenServers } from '../llm/token-chat.js';
import type { LlmServingSettings } from '../run/llm-agent.js';
import { EpisodeCollector } from './episode-collector.js';
import type { RequestBounds, RolloutRequest } from './rollout-request.js';
import type { TaskCurriculum } from './task-curriculum.js';

/** A task's group: its K token records, the oldest weight version among their turns, and how far behind that was. */
export interface RolloutGroup {
  readonly task_id: string;
  readonly group_id: string;
  readonly records: readonly TokenRecord[];
  readonly weight_version: number | null;
  /** The distinct weight versions of its turns, oldest first: two or more when a weight update came while its episodes ran. */
  readonly weight_versions: readonly number[];
  /** Versions between its oldest turn's (or newest turn's, with `staleness_from: "newest"`) and the newest known when it completed (null: no versions known). */
  readonly staleness: number | null;
  /** 0, or how many times the group was re-run for staleness. */
  readonly reruns: number;
  /** Rewards still pending when the group's wait for them ran out (`reward_wait_s`): their records count them as 0. */
  readonly missing?: readonly { readonly episode: number; readonly trace_id: string; readonly source: string }[];
}

export interface RolloutSummary {
  readonly groups: number;
  readonly episodes: number;
  readonly dropped: number;
  readonly rerun: number;
  readonly max_staleness_seen: number | null;
  /** Groups not sent because an episode of theirs ended before its first model turn (nothing to train on), and the first few such episodes. */
  readonly failed: number;
  readonly failures: readonly RolloutFailure[];
  /** Groups not sent by the request's filter: all rewards equal, or a mean outside [min_reward, max_reward]. */
  readonly filtered: { readonly zero_variance: number; readonly reward_range: number };
  /** Groups started in all (a request that draws its tasks: replacements included). */
  readonly tried: number;
  /** Groups cancelled once enough were sent (`oversample`). */
  readonly surplus: number;
}

/** An episode that ended before its first model turn, failing its group. */
export interface RolloutFailure {
  readonly task_id: string;
  readonly episode: number;
  readonly reason: string;
  readonly error?: ErrorInfo;
}

/** Failures kept in a summary: enough to see why, however many groups failed. */
const FAILURES_KEPT = 10;

/** What the rollouts need of the served run. */
export interface RolloutHost extends RequestBounds {
  readonly runId: string;
  /** A served suite's task by id, with the initial state it starts from. */
  task(id: string): { readonly task: ServedTask; readonly index: number } | undefined;
  /** The system prompt an `llm:` agent of this suite is told. */
  readonly system: string;
  /** Runs an episode in the run; rejects when the run will not start it (the server is stopping). */
  start(driver: EpisodeDriver): Promise<unknown>;
  /** Runs an episode elsewhere (on a worker), numbered in the run; rejects likewise. */
  elsewhere(episode: ElsewhereEpisode): Promise<EpisodeFinishedEvent>;
  /** Where the `llm:` rollouts run when `agent serve --workers` is given: on the workers of its queue. */
  readonly workers?: RolloutWorkers;
  readonly events: { onAny(listener: (e: RunEvent) => void): () => void };
  /** Writes an event into the run (the episodes of a group not sent, marked so). */
  record(event: RunEvent): void;
  /** The inference servers its requests used, each checked once for the server's life (not again at every request). */
  readonly tokenServers?: TokenServers;
  /** The run's curriculum (its statistics kept in the run folder), once the run has its folder. */
  curriculum(signal: AbortSignal): Promise<TaskCurriculum>;
}

/** The weights' versions a client has declared, shared by its requests: never goes back. */
export class WeightVersions {
  #current: number | undefined;

  get current(): number | undefined {
    return this.#current;
  }

  /** The trainer pushed `version`; an older one than the current is refused (nothing changes). */
  declare(version: unknown, pointer: string): void {
    if (!Number.isInteger(version) || (version as number) < 0) throw new AgentError('PARAMS_INVALID', `${pointer} must be a whole number ≥ 0 (got ${JSON.stringify(version)})`, { hint: 'Send the version the trainer just pushed to the inference server.' });
    const v = version as number;
    if (this.#current !== undefined && v < this.#current) {
      throw new AgentError('PARAMS_INVALID', `${pointer} ${v} is older than the current weight version ${this.#current}`, { hint: 'Versions only go forward: declare each new version once its weights are on the inference server.' });
    }
    this.#current = v;
  }

  /** A version the inference server reported: the newest known moves with it. */
  saw(version: number): void {
    if (this.#current === undefined || version > this.#current) this.#current = version;
  }
}

/**
 * An episode of a rollout: the request's agent on a task's initial state — its `llm:` policy in the
 * run's loop, or its program driving the episode — ending `client_closed` when the request is cancelled.
 */
class RolloutEpisode implements EpisodeDriver {
  readonly drive?: EpisodeDriver['drive'];

  constructor(
    readonly initialIndex: number,
    readonly policy: Policy,
    program: EpisodeDriver | undefined,
    readonly signal: AbortSignal,
    readonly begin: (episode: number) => void,
    readonly over: (finished: EpisodeFinishedEvent) => void,
  ) {
    const drive = program?.drive?.bind(program);
    if (drive) {
      this.drive = async (control, runSignal) => {
        const end = await drive(control, AbortSignal.any([runSignal, signal]));
        return signal.aborted && !runSignal.aborted ? Object.assign({}, end, { reason: 'client_closed' as const }) : end;
      };
    }
  }
}

/** At most `size` holders at once, served in the order they asked. */
class Slots {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  constructor(size: number) {
    this.#free = size;
  }

  async acquire(signal: AbortSignal): Promise<void> {
    if (this.#free > 0) {
      this.#free--;
      return;
    }
    await raceAbort(new Promise<void>((resolve) => this.#waiting.push(resolve)), signal);
  }

  release(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#free++;
  }
}

/** A trainer's connection: its id (its workers follow it), the weight versions it declared, and its pause. */
export interface Trainer {
  readonly id: string;
  readonly versions: WeightVersions;
  readonly gate?: GenerationGate;
}

/** A served task as the rollouts start it: the suite's task, and the initial state it starts from. */
type TaskEntry = { readonly task: ServedTask; readonly index: number };

/** Starts one episode of `task` (numbered by `begin`, ended by `over`), here or on a worker; resolves once it has ended. */
type Launch = (task: TaskEntry, signal: AbortSignal, begin: (episode: number) => void, over: (finished: EpisodeFinishedEvent) => void) => Promise<unknown>;

/**
 * Runs a request's groups, `concurrency` episodes at a time, task by task; `onGroup` gets each
 * group as it completes. Resolves with the counts once every group is sent or dropped; rejects
 * with the reason when `signal` aborts (its episodes end `client_closed`). The request's
 * `weight_version` is declared by the caller, before it answers the request accepted.
 */
export async function runRollouts(request: RolloutRequest, host: RolloutHost, trainer: Trainer, onGroup: (group: RolloutGroup) => void, signal: AbortSignal): Promise<RolloutSummary> {
  const launcher = host.workers && !request.agent ? await onWorkers(request, host, host.workers, trainer, signal) : await here(request, host, trainer, signal);
  try {
    return await rollGroups(request, host, trainer.versions, launcher.launch, onGroup, signal);
  } finally {
    await launcher.dispose();
  }
}

/** The request's agent in this process: its `llm:` policy in the run's loop, or its program driving each episode. */
async function here(request: RolloutRequest, host: RolloutHost, trainer: Trainer, signal: AbortSignal): Promise<{ readonly launch: Launch; dispose(): Promise<void> }> {
  const { versions, gate } = trainer;
  const llm: LlmServingSettings = {
    baseURL: request.baseURL,
    tokens: true,
    temperature: request.sampling.temperature,
    topP: request.sampling.top_p,
    maxTokens: request.sampling.max_tokens,
    ...(request.toolParser !== undefined ? { toolParser: request.toolParser } : {}),
    ...(request.maxContext !== undefined ? { maxContext: request.maxContext } : {}),
    weightVersion: () => versions.current,
    ...(gate ? { beforeGenerate: (s?: AbortSignal) => gate.pass(s) } : {}),
    // A trainer asks once a step: the server is checked at its first request, not at each.
    ...(host.tokenServers ? { tokenServers: host.tokenServers } : {}),
  };
  const setup: PolicySetup = { system: () => Promise.resolve(host.system), seed: request.seed, llm, signal };
  const agent = request.agent ? await programPolicy(request.agent.command, Object.assign({}, setup, { program: request.agent.limits })) : await llmPolicy(request.model, `llm:${request.model}`, setup);
  return {
    launch: (task, groupSignal, begin, over) =>
      host.start(
        new RolloutEpisode(task.index, withTask(agent.policy, () => task.task), agent.driver?.(task.index, task.task), groupSignal, begin, (finished) => {
          agent.ended(finished.episode);
          over(finished);
        }),
      ),
    dispose: async () => void (await agent.dispose?.()),
  };
}

/** The request's `llm:` agent on `agent worker`s (remote-rollouts.ts): each episode's job onto their queue, its events back into the run. */
async function onWorkers(request: RolloutRequest, host: RolloutHost, workers: RolloutWorkers, trainer: Trainer, signal: AbortSignal): Promise<{ readonly launch: Launch; dispose(): Promise<void> }> {
  const { sampling } = request;
  const agent = await workers.agent(
    {
      model: request.model,
      system: host.system,
      seed: request.seed,
      base_url: request.baseURL,
      temperature: sampling.temperature,
      top_p: sampling.top_p,
      max_tokens: sampling.max_tokens,
      ...(request.toolParser !== undefined ? { tool_parser: request.toolParser } : {}),
      ...(request.maxContext !== undefined ? { max_context: request.maxContext } : {}),
    },
    signal,
  );
  return {
    launch: (task, groupSignal, begin, over) => host.elsewhere(workers.episode({ request: agent.id, control: trainer.id, task: task.task, initial_index: task.index }, groupSignal, begin)).then(over),
    dispose: () => agent.release(),
  };
}

/** Why a group was not sent: the `reason` of its `rollout_discarded` event. */
type NotSent = 'stale' | 'zero_variance' | 'reward_range' | 'surplus';

async function rollGroups(request: RolloutRequest, host: RolloutHost, versions: WeightVersions, launch: Launch, onGroup: (group: RolloutGroup) => void, requestSignal: AbortSignal): Promise<RolloutSummary> {
  const curriculum = await host.curriculum(requestSignal);
  const collectors = new Map<number, EpisodeCollector>();
  const unsubscribe = host.events.onAny((e) => {
    if (!('episode' in e) || typeof e.episode !== 'number') return;
    // Only this request's episodes: another client's run on other weights (its own versions).
    const c = collectors.get(e.episode);
    if (!c) return;
    c.take(e);
    if (e.type === 'llm_call' && e.tokens?.weight_version !== undefined) versions.saw(e.tokens.weight_version);
  });
  const slots = new Slots(request.concurrency);
  const counts = { groups: 0, episodes: 0, dropped: 0, rerun: 0, max_staleness_seen: null as number | null, failed: 0, failures: [] as RolloutFailure[], filtered: { zero_variance: 0, reward_range: 0 }, tried: 0, surplus: 0 };
  // One group's error ends the request: its siblings stop with one abort, and none is sent after it.
  const stop = new AbortController();
  const signal = AbortSignal.any([requestSignal, stop.signal]);
  // The episodes of a group not sent stay in the run folder; this says so, so an export of the run can tell.
  const discard = (taskId: string, groupId: string, episodes: readonly number[], reason: NotSent, then: 'rerun' | 'drop' | 'replace', staleness: number | null = null): void => {
    host.record({ type: 'rollout_discarded', time: Date.now(), task_id: taskId, group_id: groupId, episodes, reason, staleness, then });
  };

  /** One episode of `task`, once a slot is free: its index and what it recorded, once complete. */
  const episode = async (task: TaskEntry, groupSignal: AbortSignal, begun: number[]): Promise<{ readonly index: number; readonly c: EpisodeCollector }> => {
    groupSignal.throwIfAborted();
    await slots.acquire(groupSignal);
    try {
      counts.episodes++;
      const c = new EpisodeCollector(request.rewardWaitMs);
      let index = -1;
      const started = launch(
        task,
        groupSignal,
        (i) => {
          index = i;
          begun.push(i);
          collectors.set(i, c);
        },
        (finished) => c.end(finished),
      ).catch((err: unknown) => c.fail(err));
      try {
        await raceAbort(c.complete, groupSignal);
      } catch (err) {
        // A surplus group's episode (the request goes on) is let end, so its index is known and marked.
        if (!signal.aborted) await started;
        throw err;
      } finally {
        c.dispose();
        collectors.delete(index);
      }
      return { index, c };
    } finally {
      slots.release();
    }
  };

  /** One group of `taskId`: true once sent; false when it was not (failed, dropped, filtered, or surplus when `surplus` aborts). */
  const group = async (taskId: string, surplus?: AbortSignal): Promise<boolean> => {
    const task = host.task(taskId) as TaskEntry;
    const groupSignal = surplus ? AbortSignal.any([signal, surplus]) : signal;
    counts.tried++;
    for (let reruns = 0; ; reruns++) {
      const begun: number[] = [];
      const runs = Array.from({ length: request.n }, () => episode(task, groupSignal, begun));
      let members: { readonly index: number; readonly c: EpisodeCollector }[];
      try {
        members = await Promise.all(runs);
      } catch (err) {
        if (signal.aborted || !surplus?.aborted) throw err;
        // Every episode of the surplus group has ended (and begun, if it was going to) before it is marked.
        await Promise.allSettled(runs);
        counts.surplus++;
        if (begun.length > 0) discard(taskId, `${taskId}/${Math.min(...begun)}`, begun, 'surplus', 'drop');
        return false;
      }
      const groupId = `${taskId}/${members[0]?.index ?? 0}`;
      const indexes = members.map((m) => m.index);
      const turnless = members.filter(({ c }) => c.turns.length === 0);
      if (turnless.length > 0) {
        counts.failed++;
        for (const { index, c } of turnless.slice(0, FAILURES_KEPT - counts.failures.length)) {
          counts.failures.push({ task_id: taskId, episode: index, reason: c.finished?.reason ?? 'interrupted', ...(c.finished?.error ? { error: c.finished.error } : {}) });
        }
        return false;
      }
      const rewards = members.map(({ c }) => cleanSum([...c.steps.values()].reduce((a, b) => a + b, 0)));
      const records = members.flatMap(({ index, c }, trial) => {
        const finished = c.finished as EpisodeFinishedEvent;
        const terminated = !truncatedBy(finished.reason);
        return episodeTokenRecords({
          runId: host.runId,
          episode: index,
          taskId,
          trial,
          turns: c.turns,
          steps: [...c.steps].map(([step, reward]) => ({ step, reward })),
          reward: rewards[trial] as number,
          end: { terminated, truncated: !terminated, reason: finished.reason },
          sampling: Object.assign({}, request.sampling, { seed: request.seed }),
          where: `episode ${index} of run ${host.runId}`,
        }).map((r) => Object.assign({}, r, { group_id: groupId }));
      });
      const weightVersions = [...new Set(records.flatMap((r) => r.turns.flatMap((t) => (t.weight_version !== undefined ? [t.weight_version] : []))))].sort((a, b) => a - b);
      const newest = versions.current;
      const from = request.stalenessFrom === 'newest' ? weightVersions.at(-1) : weightVersions[0];
      const staleness = from !== undefined && newest !== undefined ? newest - from : null;
      if (staleness !== null) counts.max_staleness_seen = Math.max(counts.max_staleness_seen ?? 0, staleness);
      curriculum.record(taskId, rewards, request.successReward, weightVersions.at(-1) ?? null, Date.now());
      if (request.maxStaleness !== undefined && staleness !== null && staleness > request.maxStaleness) {
        const rerun = request.stale === 'rerun' && reruns < SERVE_DEFAULTS.staleReruns;
        discard(taskId, groupId, indexes, 'stale', rerun ? 'rerun' : request.draw ? 'replace' : 'drop', staleness);
        if (rerun) {
          counts.rerun++;
          continue;
        }
        counts.dropped++;
        return false;
      }
      const filtered = filteredBy(request, rewards);
      if (filtered) {
        counts.filtered[filtered]++;
        discard(taskId, groupId, indexes, filtered, request.draw ? 'replace' : 'drop');
        return false;
      }
      signal.throwIfAborted();
      // Enough came in while this one completed: it is surplus too, never one group more than asked.
      if (surplus?.aborted) {
        counts.surplus++;
        discard(taskId, groupId, indexes, 'surplus', 'drop');
        return false;
      }
      counts.groups++;
      const missing = members.flatMap(({ index, c }) => c.missing().map((m) => ({ episode: index, ...m })));
      onGroup({ task_id: taskId, group_id: groupId, records, weight_version: weightVersions[0] ?? null, weight_versions: weightVersions, staleness, reruns, ...(missing.length > 0 ? { missing } : {}) });
      return true;
    }
  };
  const stopAll = (err: unknown): void => {
    if (!stop.signal.aborted) stop.abort(err);
  };

  try {
    if (request.draw) await drawGroups(request, request.draw, curriculum, group, stopAll);
    else {
      await Promise.all(
        request.taskIds.map((id) =>
          group(id).catch((err: unknown) => {
            stopAll(err);
            throw err;
          }),
        ),
      );
    }
    return counts;
  } finally {
    unsubscribe();
  }
}

/** Why the request's filter keeps a group with these episode rewards from the trainer, if it does. */
function filteredBy(request: RolloutRequest, rewards: readonly number[]): 'zero_variance' | 'reward_range' | undefined {
  const { zeroVariance, minReward, maxReward } = request.filter;
  if (zeroVariance && rewards.every((r) => r === rewards[0])) return 'zero_variance';
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  if ((minReward !== undefined && mean < minReward) || (maxReward !== undefined && mean > maxReward)) return 'reward_range';
  return undefined;
}

/**
 * `draw.groups` groups from the pool: ceil(groups × oversample) in flight, each one not sent replaced
 * by a new draw, until enough are sent (the rest cancelled as surplus) or `maxTries` were started.
 */
async function drawGroups(request: RolloutRequest, draw: NonNullable<RolloutRequest['draw']>, curriculum: TaskCurriculum, group: (taskId: string, surplus: AbortSignal) => Promise<boolean>, stopAll: (err: unknown) => void): Promise<void> {
  const sampler = curriculum.sampler(request.taskIds, draw.sampler, request.seed);
  const width = Math.ceil(draw.groups * draw.oversample);
  const enough = new AbortController();
  let sent = 0;
  let inFlight = 0;
  let tries = 0;
  await new Promise<void>((resolve, reject) => {
    const pump = (): void => {
      if (sent >= draw.groups && !enough.signal.aborted) enough.abort(new AgentError('INTERRUPTED', 'enough groups were sent'));
      while (!enough.signal.aborted && sent + inFlight < width && tries < draw.maxTries) {
        tries++;
        inFlight++;
        group(sampler.next(), enough.signal)
          .then((ok) => {
            if (ok) sent++;
          })
          .catch((err: unknown) => {
            // The first error ends the request: no group is started after it.
            if (!enough.signal.aborted) enough.abort(err);
            stopAll(err);
            reject(err);
          })
          .finally(() => {
            inFlight--;
            pump();
          });
      }
      if (inFlight === 0) resolve();
    };
    pump();
  });
}
