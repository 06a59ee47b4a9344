/**
 * A served run's scheduler: a server pushes episodes in as its clients open them (a reset, a
 * rollout), and each starts at once, numbered in the order it came. Opened before the run is live,
 * an episode waits for it; once the server stops (`close`) or the run's signal aborts, an open is
 * refused. A resumed run first ends the episodes that were open when its process stopped: their
 * clients are gone, so each ends `client_lost` with the steps it committed.
 */
import { AgentError } from '../shared/errors.js';
import type { EpisodeControl, EpisodeDriver } from './episode-runner.js';
import type { EpisodeFinishedEvent } from './run-journal.js';
import type { EpisodeLauncher, Scheduler } from './scheduler.js';

/** An episode a client drives itself (its steps come from the client, not a policy). */
export type DrivenEpisode = EpisodeDriver & Required<Pick<EpisodeDriver, 'drive'>>;

/**
 * An episode run in another process (a rollout on an `agent worker`): handed its index, it puts the
 * episode's events into the run through `launcher` once they come back, and resolves with its end.
 */
export type ElsewhereEpisode = (index: number, launcher: Pick<EpisodeLauncher, 'committed' | 'ended'>, signal: AbortSignal) => Promise<EpisodeFinishedEvent>;

/** What an episode is started as: driven here, or run elsewhere. */
type Launch = { readonly driver: EpisodeDriver } | { readonly elsewhere: ElsewhereEpisode };

interface Waiting {
  readonly launch: Launch;
  readonly resolve: (finished: EpisodeFinishedEvent) => void;
  readonly reject: (err: unknown) => void;
}

const stopping = (): AgentError => new AgentError('INTERRUPTED', 'the server is stopping');

export class SessionScheduler implements Scheduler {
  readonly resumeCommand = 'agent serve';
  readonly continuesEpisodes = false;
  readonly stopIsEnd = true;
  readonly remote = false;
  #launch: ((launch: Launch) => Promise<EpisodeFinishedEvent>) | undefined;
  readonly #waiting: Waiting[] = [];
  #closed = false;
  #wake: (() => void) | undefined;

  /** Runs `driver`'s episode (a policy-driven one: a rollout's); resolves once it has ended, rejects when the run will not start it. */
  start(driver: EpisodeDriver): Promise<EpisodeFinishedEvent> {
    return this.#start({ driver });
  }

  /** Runs an episode elsewhere, numbered here like every other; resolves once it has ended, rejects when the run will not start it. */
  elsewhere(episode: ElsewhereEpisode): Promise<EpisodeFinishedEvent> {
    return this.#start({ elsewhere: episode });
  }

  #start(launch: Launch): Promise<EpisodeFinishedEvent> {
    if (this.#closed) return Promise.reject(stopping());
    if (this.#launch) return this.#launch(launch);
    return new Promise((resolve, reject) => this.#waiting.push({ launch, resolve, reject }));
  }

  /**
   * Starts a client's episode; resolves with its control once the run has reset its instance and
   * handed it over. Rejects when the run will not start it, or when it ended before it started (a
   * reset that failed: the error says why).
   */
  open(driver: DrivenEpisode): Promise<EpisodeControl> {
    let handOver!: (control: EpisodeControl) => void;
    const started = new Promise<EpisodeControl>((resolve) => (handOver = resolve));
    const finished = this.start({
      ...(driver.initialIndex !== undefined ? { initialIndex: driver.initialIndex } : {}),
      begin: (episode) => driver.begin?.(episode),
      over: (f) => driver.over?.(f),
      drive: (control, signal) => {
        handOver(control);
        return driver.drive(control, signal);
      },
    });
    const neverStarted = finished.then((f): never => {
      throw new AgentError(f.error?.code === 'INTERRUPTED' ? 'INTERRUPTED' : 'INTERNAL', `the episode could not start: ${f.error?.message ?? f.reason}`);
    });
    return Promise.race([started, neverStarted]);
  }

  /** No more episodes: those waiting for the run are refused, and the run ends once those running have. */
  close(): void {
    this.#closed = true;
    for (const w of this.#waiting.splice(0)) w.reject(stopping());
    this.#wake?.();
  }

  async drive(launcher: EpisodeLauncher, signal: AbortSignal): Promise<void> {
    const running = new Set<Promise<unknown>>();
    const track = (episode: Promise<EpisodeFinishedEvent>): Promise<EpisodeFinishedEvent> => {
      const settled: Promise<unknown> = episode.then(
        () => running.delete(settled),
        () => running.delete(settled),
      );
      running.add(settled);
      return episode;
    };
    let next = 0;
    for (const [i, entry] of launcher.resumed ?? []) {
      next = Math.max(next, i + 1);
      if (entry.status === 'running') track(launcher.episode(i, signal, clientGone(entry.initial_state_id)));
    }
    const stopped = new Promise<void>((resolve) => (this.#wake = resolve));
    const onAbort = (): void => this.close();
    if (signal.aborted) this.close();
    else signal.addEventListener('abort', onAbort, { once: true });
    try {
      if (!this.#closed) {
        this.#launch = (launch) => {
          const index = next++;
          return track('driver' in launch ? launcher.episode(index, signal, launch.driver) : launch.elsewhere(index, launcher, signal));
        };
        for (const w of this.#waiting.splice(0)) this.#launch(w.launch).then(w.resolve, w.reject);
        await stopped;
      }
    } finally {
      this.#launch = undefined;
      this.#wake = undefined;
      signal.removeEventListener('abort', onAbort);
    }
    await Promise.all(running);
  }
}

/** A served episode open when the run's process stopped, resumed without its client: it ends at once, `client_lost`. */
function clientGone(initialStateId: string): EpisodeDriver {
  return { initialIndex: Number(initialStateId.slice('initial-'.length)), drive: () => Promise.resolve({ reason: 'client_lost', reward: 0 }) };
}
