/**
 * A run spread over worker threads (`agent run --threads N`): the run's own thread is its host —
 * the folder, the live view, the statistics, the summary — and N threads run its episodes, each
 * with its own copy of the env and the policy (thread-entry.ts). Episodes are handed out one at a
 * time as slots free up, `concurrency` of them in flight across the threads; what a thread's
 * episodes commit comes back as it happens and goes into the run as a remote scheduler's does, so
 * the folder has the same records as a run in one thread. Its episodes keep no journal: a
 * threaded run is a memory run, not resumable.
 */
import type { Worker } from 'node:worker_threads';
import type { SandboxMode } from '../sandbox/sandbox.js';
import type { ErrorInfo } from '../events/env-events.js';
import type { RunEvent } from '../events/run-events.js';
import type { EpisodeRecord } from '../replay/run-writer.js';
import { AgentError } from '../shared/errors.js';
import type { ErrorCode } from '../shared/error-codes.js';
import type { JsonValue } from '../shared/json.js';
import { siblingModule, startModuleWorker } from '../shared/module-worker.js';
import type { LlmPolicySettings } from './llm-agent.js';
import type { EpisodeFinishedEvent } from './run-journal.js';
import type { EpisodeLauncher, EventText, Scheduler } from './scheduler.js';

const ENTRY = siblingModule(import.meta.url, 'thread-entry');

/** What each thread opens, as the run opened it (all of it structured-clonable). */
export interface ThreadSetup {
  readonly runId: string;
  readonly envDir: string;
  readonly seed: number;
  readonly maxSteps: number;
  /** The policy by name: a module path, `random`, `llm:<model>`. */
  readonly policy: string;
  readonly llm?: LlmPolicySettings & { readonly system?: string; readonly instruction?: string };
  readonly toolOptions?: Readonly<Record<string, JsonValue>>;
  readonly rewardSources?: Readonly<Record<string, unknown>>;
  readonly blockThresholdMs?: number;
  readonly sandbox?: SandboxMode;
  readonly initialStates: readonly JsonValue[];
  /** The run wants each episode's final state (a caller's `onEpisodeEnd`): sent with its end. */
  readonly finalStates: boolean;
}

/** From the run's thread to a worker thread (`written`: a batch of its items is in the run, and the folder has caught up). */
export type ToThread = { readonly kind: 'episodes'; readonly episodes: readonly number[] } | { readonly kind: 'written' } | { readonly kind: 'finish' } | { readonly kind: 'stop' };

/**
 * What a thread's episodes commit, in order. Events travel as the JSON the folder takes (a step's
 * trajectory record with it): serialized in the thread, they cost the run's thread a parse instead
 * of a structured clone and a stringify, the larger share of its work a step.
 */
export type ThreadItem = ({ readonly kind: 'event' } & EventText) | { readonly kind: 'end'; readonly finished: string; readonly record?: EpisodeRecord; readonly final?: JsonValue };

/** From a worker thread to the run's thread. */
export type FromThread = { readonly kind: 'ready' } | { readonly kind: 'failed'; readonly error: ErrorInfo } | { readonly kind: 'items'; readonly items: readonly ThreadItem[] } | { readonly kind: 'done' };

interface Thread {
  readonly worker: Worker;
  /** Episodes this thread may run at once. */
  readonly slots: number;
  running: number;
  /** Told to finish (nothing left to hand out). */
  finished: boolean;
  /** Said it is done: its exit is expected. */
  done: boolean;
}

export class ThreadScheduler implements Scheduler {
  readonly resumeCommand = 'agent run';
  readonly continuesEpisodes = true;
  readonly stopIsEnd = false;
  readonly remote = true;

  constructor(
    readonly threads: number,
    readonly episodes: number,
    readonly concurrency: number,
    readonly setup: ThreadSetup,
  ) {}

  async drive(launcher: EpisodeLauncher, signal: AbortSignal): Promise<void> {
    const count = Math.min(this.threads, this.concurrency, Math.max(1, this.episodes));
    const threads: Thread[] = Array.from({ length: count }, (_, i) => ({
      worker: startModuleWorker(ENTRY, this.setup),
      // The run's concurrency split across the threads, the first ones taking the remainder.
      slots: Math.floor(this.concurrency / count) + (i < this.concurrency % count ? 1 : 0),
      running: 0,
      finished: false,
      done: false,
    }));
    try {
      await Promise.all(threads.map((t) => ready(t.worker, signal)));
      await this.#run(threads, launcher, signal);
    } finally {
      await Promise.all(threads.map((t) => t.worker.terminate()));
    }
  }

  #run(threads: readonly Thread[], launcher: EpisodeLauncher, signal: AbortSignal): Promise<void> {
    let next = 0;
    const more = (): boolean => next < this.episodes && !signal.aborted && !launcher.stopped();
    /** Fills a thread's free slots, or tells it to finish once there is nothing left to hand out. */
    const feed = (t: Thread): void => {
      const episodes: number[] = [];
      while (t.running < t.slots && more()) {
        episodes.push(next++);
        t.running++;
      }
      if (episodes.length > 0) post(t, { kind: 'episodes', episodes });
      else if (t.running === 0 && !t.finished) {
        t.finished = true;
        post(t, { kind: 'finish' });
      }
    };
    return new Promise<void>((resolve, reject) => {
      let open = threads.length;
      let failed = false;
      const fail = (err: unknown): void => {
        if (failed) return;
        failed = true;
        cleanup();
        reject(err);
      };
      const onAbort = (): void => {
        for (const t of threads) post(t, { kind: 'stop' });
      };
      const listeners = threads.map((t) => {
        const onMessage = (m: FromThread): void => {
          if (m.kind === 'items') {
            let ended = 0;
            for (const item of m.items) {
              if (item.kind === 'event') launcher.committed(JSON.parse(item.json) as RunEvent, item);
              else {
                const finished = JSON.parse(item.finished) as EpisodeFinishedEvent;
                launcher.committed(finished, { json: item.finished });
                launcher.ended(finished, item.record, item.final);
                ended++;
              }
            }
            t.running -= ended;
            // Once the folder has caught up: the thread's window opens again, and its freed slots get
            // the next episodes (a thread runs no further ahead of the folder than WINDOW batches).
            launcher.breathe().then(() => {
              post(t, { kind: 'written' });
              if (ended > 0) feed(t);
            }, fail);
          } else if (m.kind === 'done' && !t.done) {
            t.done = true;
            open--;
            if (open === 0) {
              cleanup();
              resolve();
            }
          }
        };
        const onError = (err: Error): void => fail(new AgentError('INTERNAL', `a worker thread of the run crashed: ${err.message}`, { cause: err }));
        const onExit = (code: number): void => {
          if (!t.done) fail(new AgentError('INTERNAL', `a worker thread of the run exited (code ${code}) before its episodes ended`));
        };
        t.worker.on('message', onMessage);
        t.worker.on('error', onError);
        t.worker.on('exit', onExit);
        return () => {
          t.worker.off('message', onMessage);
          t.worker.off('error', onError);
          t.worker.off('exit', onExit);
        };
      });
      const cleanup = (): void => {
        signal.removeEventListener('abort', onAbort);
        for (const off of listeners) off();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      if (signal.aborted) onAbort();
      for (const t of threads) feed(t);
    });
  }
}

function post(t: Thread, message: ToThread): void {
  t.worker.postMessage(message);
}

/** Resolves once the thread has opened the env and the policy (or the run is stopping: it is told so next); rejects with its error if it could not. */
function ready(worker: Worker, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const off = (): void => {
      worker.off('message', onMessage);
      worker.off('error', onError);
      signal.removeEventListener('abort', onAbort);
    };
    const onMessage = (m: FromThread): void => {
      if (m.kind === 'ready') {
        off();
        resolve();
      } else if (m.kind === 'failed') {
        off();
        reject(new AgentError(m.error.code as ErrorCode, m.error.message, m.error.hint ? { hint: m.error.hint } : {}));
      }
    };
    const onError = (err: Error): void => {
      off();
      reject(new AgentError('INTERNAL', `a worker thread of the run could not start: ${err.message}`, { cause: err }));
    };
    const onAbort = (): void => {
      off();
      resolve();
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
