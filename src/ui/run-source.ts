/** What a reporter needs from a run. Types only: the UI never reaches into the core. */
import type { RunConfig, RunEvent } from '../events/run-events.js';
import type { RunProgress } from '../run/run-stats.js';

/** What the run view follows: a run's config, its events and its live progress. */
export interface RunSource {
  readonly config: RunConfig;
  progress(): RunProgress;
  readonly events: { onAny(listener: (event: RunEvent) => void): () => void };
  /** A line the live view shows under the progress (a benchmark's success so far). */
  headline?(): string | undefined;
}

/** Where a view writes the lines that stay after it closes (the summary). */
export interface Output {
  write(text: string): unknown;
}
