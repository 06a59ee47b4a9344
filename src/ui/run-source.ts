/** What a reporter needs from a run. Types only: the UI never reaches into the core. */
import type { RunConfig, RunEvent } from '../events/run-events.js';
import type { RunProgress } from '../run/run-stats.js';

export interface RunSource {
  readonly config: RunConfig;
  progress(): RunProgress;
  readonly events: { onAny(listener: (event: RunEvent) => void): () => void };
  /** A line the live view shows under the progress (a benchmark's success so far). */
  headline?(): string | undefined;
}

export interface Output {
  write(text: string): unknown;
}
