/**
 * A run is a host (its env, events, folder, journal, servers and summary) and a scheduler that
 * decides which episodes run when: a pool of N episodes C at a time (`agent run`, `agent
 * benchmark`), sessions a server pushes in as its clients open them (`agent serve`, rollouts), or
 * the distributed coordinator (episodes on workers), worker threads (thread-scheduler.ts). The host runs each episode it is handed
 * through the episode runner, recorded the same way whoever scheduled it.
 *
 * A new way to drive a run is a new scheduler: it implements {@link Scheduler}, and says through
 * its traits how the host ends and resumes it; the host checks no mode of its own.
 */
import type { RunEvent } from '../events/run-events.js';
import type { EpisodeRecord } from '../replay/run-writer.js';
import type { JsonValue } from '../shared/json.js';
import type { EpisodeDriver } from './episode-runner.js';
import type { EpisodeFinishedEvent, JournalEpisode } from './run-journal.js';

/** What a scheduler drives episodes through: the host's episode runner, the journal of a resumed run, and the run's stop rule. */
export interface EpisodeLauncher {
  /** Runs episode `index` to its end: driven by `driver`, or by the run's own policy. */
  episode(index: number, signal: AbortSignal, driver?: EpisodeDriver): Promise<EpisodeFinishedEvent>;
  /** What a resumed run's journal holds of its episodes (undefined for a new run). */
  readonly resumed: ReadonlyMap<number, JournalEpisode> | undefined;
  /** True once an episode failed with an error that stops the run (the error table's `stopsRun`): start no more. */
  stopped(): boolean;
  /** An event an episode committed elsewhere (a remote scheduler's): into the run's stream, statistics, reward ledger and folder; with `text`, its folder lines as they were serialized there. */
  committed(event: RunEvent, text?: EventText): void;
  /** An episode that ended elsewhere: its record (and initial state) into the run folder, and counted when it ran to an end; its final state, when sent, to the run's `onEpisodeEnd`. */
  ended(finished: EpisodeFinishedEvent, record: EpisodeRecord | undefined, finalState?: JsonValue): void;
  /** Waits while the run folder's writer is behind (a remote scheduler calls it between batches). */
  breathe(): Promise<void>;
}

/** An event's folder lines, serialized where it was committed: its events.jsonl JSON, and a step's trajectory record. */
export interface EventText {
  readonly json: string;
  readonly trajectory?: string;
}

export interface Scheduler {
  /** The command that continues the run after its process stopped. */
  readonly resumeCommand: 'agent run' | 'agent serve';
  /** Whether an episode cut off by a stop continues on resume (a policy picks it up again; a client that left cannot). */
  readonly continuesEpisodes: boolean;
  /** Whether the run's signal aborting is its normal end (a server stopped) rather than an interruption. */
  readonly stopIsEnd: boolean;
  /** Whether its episodes run elsewhere and come back committed (a distributed run's workers), through the launcher's `committed` and `ended`. */
  readonly remote: boolean;
  /** Starts episodes through `launcher` until the run's work is done or `signal` aborts; resolves once every episode it started has ended. */
  drive(launcher: EpisodeLauncher, signal: AbortSignal): Promise<void>;
}

/** N episodes, C at a time, in order; a resumed run runs those its journal does not have finished. No episode starts once the run is stopped. */
export class PoolScheduler implements Scheduler {
  readonly resumeCommand = 'agent run';
  readonly continuesEpisodes = true;
  readonly stopIsEnd = false;
  readonly remote = false;

  constructor(
    readonly episodes: number,
    readonly concurrency: number,
    /** Each episode's driver, when the policy drives episodes itself (an agent program); else the run's policy loop. */
    readonly driverFor?: (episode: number) => EpisodeDriver,
  ) {}

  async drive(launcher: EpisodeLauncher, signal: AbortSignal): Promise<void> {
    const remaining = Array.from({ length: this.episodes }, (_, i) => i).filter((i) => launcher.resumed?.get(i)?.status !== 'finished');
    let next = 0;
    const worker = async (): Promise<void> => {
      while (!signal.aborted && !launcher.stopped() && next < remaining.length) {
        const index = remaining[next++] as number;
        await launcher.episode(index, signal, this.driverFor?.(index));
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.concurrency, remaining.length) }, worker));
  }
}
