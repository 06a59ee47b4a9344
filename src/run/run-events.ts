/** Events of a run: every env event, plus the run's own. */
import type { EnvEvent, EnvEventOf, ErrorInfo } from '../env/events.js';

/** A settled step as a run reports it: with the actions the policy chose among. */
export type SettledStepEvent = EnvEventOf<'trace_settled'> & { readonly availableActions?: readonly string[] };

export type EpisodeEndReason = 'done' | 'max_steps' | 'policy_stop' | 'no_actions' | 'policy_error' | 'interrupted';

export interface RunConfig {
  readonly env: string;
  readonly episodes: number;
  readonly concurrency: number;
  readonly maxSteps: number;
  readonly seed: number;
  readonly policy: string;
}

export type RunEvent =
  | Exclude<EnvEvent, { type: 'trace_settled' }>
  | SettledStepEvent
  /** `port`: the run's local server, when started with one (POST /rewards). */
  | { readonly type: 'run_started'; readonly time: number; readonly runId: string; readonly dir: string; readonly config: RunConfig; readonly port?: number }
  /** `initialStateId` names the episode's initial state in states.jsonl. */
  | { readonly type: 'episode_started'; readonly time: number; readonly instanceId: string; readonly episode: number; readonly initialStateId: string }
  | {
      readonly type: 'episode_finished';
      readonly time: number;
      readonly instanceId: string;
      readonly episode: number;
      readonly steps: number;
      readonly reward: number;
      readonly reason: EpisodeEndReason;
      readonly durationMs: number;
      readonly error?: ErrorInfo;
    }
  /** After the env closed: calls whose handler ignored its AbortSignal and is still running. */
  | { readonly type: 'calls_abandoned'; readonly time: number; readonly calls: readonly { readonly tool: string; readonly traceId: string }[] }
  | { readonly type: 'run_finished'; readonly time: number; readonly runId: string; readonly status: 'completed' | 'interrupted' };
