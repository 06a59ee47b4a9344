/**
 * Where a run records its episodes: the recorder is the episode runner's hooks and the run
 * stream's path into the folder. In memory, every event goes straight to the folder and a finished
 * episode's history is dropped. Journaled (a Redis store), Redis comes first: a step reaches the
 * folder once its journal write is acknowledged, an episode's end is journaled before its history
 * is archived, a resumed run's past is replayed from the journal, and the store is watched (an
 * outage past the store wait stops the run, resumable). A run whose episodes run elsewhere (its
 * scheduler is remote: a distributed run's workers) journals nothing itself: their events come
 * back committed, and the folder takes them as they are.
 */
import type { AgentEnv } from '../env/agent-env.js';
import type { EnvEvent } from '../events/env-events.js';
import type { RunEvent, SettledStepEvent } from '../events/run-events.js';
import { trajectoryRecord, type EpisodeRecord, type RunWriter } from '../replay/run-writer.js';
import { isLoggedReward, rewardEvent, rewardRecord } from '../replay/reward-log.js';
import { openTrajectoryStep } from '../replay/run-rewards.js';
import type { Clock } from '../shared/clock.js';
import { AgentError, isAgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import type { RewardBinding } from '../schema/definition.js';
import { retireDistributed } from './coordinator.js';
import { archiveAndDrop, durableHooks, stopRetrying, watchStore, type Durable } from './durable.js';
import { STORE_FAILURES, type EpisodeHooks, type EpisodeRunner, type PriorSteps } from './episode-runner.js';
import type { EpisodeFinishedEvent, JournalContents, JournalRun } from './run-journal.js';
import type { RunStats } from './run-stats.js';
import type { EventText } from './scheduler.js';
import type { RunSummary } from './run-summary.js';

/** What a recorder needs of the run it records. */
export interface RecorderHost {
  readonly runId: string;
  readonly env: AgentEnv;
  readonly runner: EpisodeRunner;
  readonly stats: RunStats;
  readonly clock: Clock;
  readonly episodes: number;
  readonly initialStates: readonly JsonValue[];
  /** Where finished episodes' histories are archived. */
  readonly historyDir: string;
  /** Whether an episode cut off by a stop continues on resume (the scheduler's trait). */
  readonly continuesEpisodes: boolean;
  /** Episodes that ran to an end: a resume counts those its journal has. */
  readonly counted: Set<number>;
  emit(event: RunEvent): void;
  /** The run folder's writer, while the run executes. */
  writer(): RunWriter | undefined;
  /** True once the run is stopping (its signal aborted). */
  stopping(): boolean;
  /** Stops the run on a store failure (once). */
  fail(err: AgentError): void;
  /** The store failure that stopped the run, if one did. */
  failure(): AgentError | undefined;
}

export interface RunRecorder {
  /** The episode runner's hooks (all but `ended`, which is the run's). */
  readonly hooks: Omit<EpisodeHooks, 'ended'>;
  /** An env event into the run's stream; a settled step is committed first (and journaled). */
  forward(e: EnvEvent | SettledStepEvent): void;
  /** A run event into the run folder. */
  write(writer: RunWriter, e: RunEvent): void;
  /** An event committed elsewhere (a remote scheduler's, a rollout worker's) into the run folder: journaled first when the run journals its own episodes. */
  elsewhere(writer: RunWriter, e: RunEvent, text?: EventText): void;
  /** An episode that ended elsewhere: its initial state and record into the folder (journaled first, likewise). */
  endedElsewhere(writer: RunWriter, finished: EpisodeFinishedEvent, record: EpisodeRecord | undefined): void;
  /** The run is starting: its journal written (a new run) and the store watched. Returns the unwatch. */
  open(signal: AbortSignal, resume: string): Promise<() => void>;
  /** A resumed run's past, from its journal, into the folder, the statistics and the reward ledger (after `run_started`). */
  resume(writer: RunWriter, lostSteps: number): Promise<void>;
  /** The run has ended: a completed one's journal and keys are retired, an interrupted one's kept to resume. */
  close(status: RunSummary['status']): Promise<void>;
  /** A store failure stopped the run: stop retrying what waits on the store. */
  failed(err: AgentError): void;
}

/** Records into the run folder only; each finished episode's history is dropped (it lives on in the folder). */
export function memoryRecorder(host: RecorderHost): RunRecorder {
  const forward = (e: EnvEvent | SettledStepEvent): void => {
    if (e.type !== 'trace_settled') return host.emit(e);
    if (host.failure()) return;
    if (failedStore(host, e)) return;
    host.emit(host.runner.committed(e));
  };
  return {
    hooks: {
      initialState: (id, state) => host.writer()?.writeState(id, state),
      settled: forward,
      storeFailed: (err) => host.fail(err),
      close: async (record, finished) => {
        if (record) host.writer()?.writeEpisode(record);
        await host.env.store.drop(finished.instance_id);
        return true;
      },
    },
    forward,
    write: (writer, e) => writer.write(e),
    elsewhere: (writer, e, text) => writer.write(e, text?.json, text?.trajectory),
    endedElsewhere: (writer, _finished, record) => writeRecord(host, writer, record),
    open: () => Promise.resolve(() => undefined),
    resume: () => Promise.resolve(),
    close: () => Promise.resolve(),
    failed: () => undefined,
  };
}

export interface JournalOptions {
  /** What the journal holds of the run (a new run's is written as it starts). */
  readonly run: JournalRun;
  /** How long Redis may stay away before the run stops. */
  readonly storeWaitMs: number;
  /** The run's episodes run elsewhere (its scheduler's trait). */
  readonly remote: boolean;
}

/**
 * Records through a durable run's journal. With `remote`, the run's episodes run elsewhere: the
 * folder takes their committed events as they come, and a resume rereads them from their stream
 * (the scheduler's), not from this journal.
 */
export function journalRecorder(host: RecorderHost, durable: Durable, o: JournalOptions): RunRecorder {
  const { remote } = o;
  const { journal } = durable;
  /** A resumed run's committed steps, per episode, until the episode continues. */
  const priorSteps = new Map<number, SettledStepEvent[]>();
  const write = (step: SettledStepEvent, json: string): void => host.writer()?.write(step, json);

  const forward = (e: EnvEvent | SettledStepEvent): void => {
    if (e.type !== 'trace_settled') {
      if (isLoggedReward(e)) journal.reward(rewardRecord(e)).catch(() => undefined);
      return host.emit(e);
    }
    // The run is stopping on a store failure: a step settling now was not committed. A run being
    // interrupted does not commit the calls it cancels either: they stay in flight, for the resume
    // to run again (idempotent tools) or settle as TOOL_LOST.
    if (host.failure()) return;
    if (host.stopping() && e.error?.code === 'TOOL_CANCELLED') return;
    if (failedStore(host, e)) return;
    const step = host.runner.committed(e);
    // Serialised once, for the journal and then the run folder.
    const json = JSON.stringify(step);
    journal.step(step, json).then(
      () => write(step, json),
      () => undefined,
    );
    host.emit(step);
  };

  /**
   * An episode's end: journaled first, then its record into the folder and its history archived
   * and removed from Redis. An interrupted episode keeps its history, to continue on resume.
   */
  const close = async (record: EpisodeRecord | undefined, finished: EpisodeFinishedEvent): Promise<boolean> => {
    if ((finished.reason === 'interrupted' && host.continuesEpisodes) || host.failure()) {
      // After a store failure the journal takes no more writes: a record now would count steps the
      // folder never got. The episode is not over; a resume writes its record.
      if (record && !host.failure()) journal.after(() => host.writer()?.writeEpisode(record));
      return false;
    }
    try {
      await journal.episodeFinished(finished.episode, record, finished);
      if (record) host.writer()?.writeEpisode(record);
      await archiveAndDrop(durable, finished.instance_id, host.historyDir);
      return true;
    } catch (err) {
      // The journal's failure stops the run; so does a history that cannot be archived as it is (a
      // hole). The episode continues on resume.
      if (isAgentError(err) && STORE_FAILURES.has(err.code)) host.fail(err);
      return false;
    }
  };

  const prior = (index: number): PriorSteps | undefined => {
    const resumed = durable.resumed;
    if (resumed?.episodes.get(index)?.status !== 'running') return undefined;
    const steps = priorSteps.get(index) ?? [];
    priorSteps.delete(index);
    return { steps, inflight: resumed.inflight.get(index) };
  };

  journal.onFailure = (err) => host.fail(err);
  return {
    hooks: { ...durableHooks(durable), prior, initialState: (id, state) => host.writer()?.writeState(id, state), settled: forward, storeFailed: (err) => host.fail(err), close },
    forward,
    // The folder shows a record only once Redis has acknowledged it: a crash never leaves the
    // folder ahead of what a resume continues from (a step goes once its own journal write
    // succeeded: see forward). Remote episodes' events are committed already.
    write: (writer, e) => {
      if (remote) writer.write(e);
      else if (e.type !== 'trace_settled') journal.after(() => writer.write(e));
    },
    // A rollout episode a worker ran and delivered whole: journaled here like the run's own, so that
    // a resume finds its steps and its end (and numbers new episodes after it).
    elsewhere: (writer, e, text) => {
      if (remote) return writer.write(e, text?.json, text?.trajectory);
      if (e.type === 'trace_settled') {
        const json = JSON.stringify(e);
        journal.step(e, json).then(
          () => writer.write(e, json),
          () => undefined,
        );
        return;
      }
      if (isLoggedReward(e)) journal.reward(rewardRecord(e)).catch(() => undefined);
      journal.after(() => writer.write(e));
    },
    endedElsewhere: (writer, finished, record) => {
      if (remote) return writeRecord(host, writer, record);
      journal.episodeFinished(finished.episode, record, finished).then(
        () => writeRecord(host, writer, record),
        () => undefined,
      );
    },
    open: async (signal, resume) => {
      if (!durable.resumed) {
        await journal.create(o.run, signal);
        await journal.acquire(signal);
      }
      return watchStore(durable, { clock: host.clock, waitMs: o.storeWaitMs, emit: (e) => host.emit(e), stopping: () => host.failure() !== undefined || host.stopping(), fail: (err) => host.fail(err), resume });
    },
    resume: async (writer, lostSteps) => {
      const resumed = durable.resumed;
      if (!resumed || remote) return;
      replay(host, writer, resumed, priorSteps);
      // Episodes that finished just before the crash may still have their history in Redis.
      for (const [episode, entry] of resumed.episodes) if (entry.status === 'finished') await archiveAndDrop(durable, `ep-${episode}`, host.historyDir);
      host.emit({ type: 'run_resumed', time: host.clock.now(), run_id: host.runId, steps: resumed.steps.length, episodes_finished: [...resumed.episodes.values()].filter((e) => e.status === 'finished').length, inflight: resumed.inflight.size, lost_steps: lostSteps });
    },
    close: async (status) => {
      const failed = host.failure() !== undefined;
      try {
        if (status === 'completed' && !failed) {
          await Promise.all(Array.from({ length: host.episodes }, (_, i) => durable.store.drop(`ep-${i}`)));
          if (durable.queue) await retireDistributed(durable.redis, durable.queue, host.runId, host.episodes);
          await journal.retire();
        } else if (!failed) await journal.setStatus('interrupted');
      } catch {
        // Redis went away as the run ended: the journal still says running, which a resume handles the same.
      }
      await journal.release();
    },
    failed: (err) => stopRetrying(durable, err),
  };
}

/** The reward sources of a run's env, as the reward ledger keys them. */
export function rewardSources(env: AgentEnv): Map<string, { binding: RewardBinding['kind']; weight: number }> {
  return new Map([...env.definition.rewards.values()].map((r) => [r.name, { binding: r.binding.kind, weight: r.weight }]));
}

/** An episode's record and the initial state it names into the folder. */
function writeRecord(host: RecorderHost, writer: RunWriter, record: EpisodeRecord | undefined): void {
  if (!record) return;
  writer.writeState(record.initial_state_id, host.initialStates[Number(record.initial_state_id.slice('initial-'.length))] ?? null);
  writer.writeEpisode(record);
}

/** A step that settled with a store failure stops the run (true: it is not committed). */
function failedStore(host: RecorderHost, e: SettledStepEvent): boolean {
  if (!e.error || !STORE_FAILURES.has(e.error.code)) return false;
  host.fail(new AgentError(e.error.code as 'STORE_WRITES_LOST', e.error.message, e.error.hint ? { hint: e.error.hint } : {}));
  return true;
}

/**
 * A resumed run's past, from its journal: the folder's logs rewritten as committed, the statistics
 * and the reward ledger rebuilt (deadlines that passed meanwhile apply now), and the steps of
 * episodes still running kept for them to continue from.
 */
function replay(host: RecorderHost, writer: RunWriter, resumed: JournalContents, priorSteps: Map<number, SettledStepEvent[]>): void {
  const { stats, env } = host;
  const sources = rewardSources(env);
  const ledger = env.rewards.ledger;
  for (const step of resumed.steps) {
    writer.writeStep(step);
    stats.apply({ type: 'tool_finished', time: step.time, instance_id: step.instance_id, trace_id: step.trace_id, tool: step.action, ok: step.status === 'resolved', duration_ms: step.duration_ms, attempts: 1 });
    stats.apply(step);
    for (const [source, entry] of Object.entries(step.rewards)) {
      if (sources.get(source)?.binding !== 'tool' || typeof entry.value !== 'number') continue;
      stats.apply({ type: 'reward_arrived', time: step.time, instance_id: step.instance_id, trace_id: step.trace_id, episode: step.episode, step: step.step, source, value: entry.value, key: 'tool', delay_ms: 0, reward: step.reward });
    }
    let list = priorSteps.get(step.episode);
    if (!list) priorSteps.set(step.episode, (list = []));
    list.push(step);
    if (ledger.hasDelayed) openTrajectoryStep(ledger, trajectoryRecord(host.runId, step), sources);
  }
  for (const record of resumed.rewards) {
    writer.writeRewardRecord(record);
    const event = rewardEvent(record);
    ledger.replay(event);
    stats.apply({ ...event, instance_id: record.instance_id } as RunEvent);
  }
  for (const [episode, entry] of resumed.episodes) {
    if (entry.status !== 'finished') continue;
    if (entry.record) {
      const stateId = entry.record.initial_state_id;
      writer.writeState(stateId, host.initialStates[Number(stateId.slice('initial-'.length))] ?? null);
      writer.writeEpisode(entry.record);
    }
    stats.apply(entry.event);
    if (entry.event.reason !== 'interrupted') host.counted.add(episode);
    priorSteps.delete(episode);
  }
  env.rewards.expireDue();
}
