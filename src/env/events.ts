/**
 * The typed events of the core. Every output (the live view, the run folder, JSON lines, the
 * debug console) is a subscriber; the core itself never prints. All events carry the event
 * time (epoch ms) and the instance id; trace-scoped ones carry the trace id.
 */
import type { LifecycleStatus } from '../lifecycle/lifecycle.js';
import type { JsonObject, JsonValue } from '../shared/json.js';
import type { Patch } from '../state/patch.js';

export type RewardStatus = 'arrived' | 'pending' | 'imputed';

export interface RewardEntry {
  /** null while pending. */
  readonly value: number | null;
  readonly status: RewardStatus;
  /** The source's declared delay. */
  readonly delayMs: number;
}

export type TraceStatus = 'resolved' | 'timeout' | 'failed';

export interface ErrorInfo {
  readonly code: string;
  readonly message: string;
  readonly hint?: string;
  readonly tool?: string;
  readonly retryable?: boolean;
}

interface Base {
  readonly time: number;
  readonly instanceId: string;
}

export type EnvEvent =
  | (Base & { readonly type: 'dispatched'; readonly traceId: string; readonly action: string; readonly params: JsonObject; readonly episode: number })
  | (Base & { readonly type: 'tool_started'; readonly traceId: string; readonly tool: string })
  | (Base & {
      readonly type: 'tool_finished';
      readonly traceId: string;
      readonly tool: string;
      readonly ok: boolean;
      readonly durationMs: number;
      readonly attempts: number;
      readonly error?: ErrorInfo;
      readonly fallback?: string;
    })
  | (Base & { readonly type: 'state_committed'; readonly traceId: string; readonly seq: number; readonly patch: Patch })
  | (Base & { readonly type: 'reward_arrived'; readonly traceId: string; readonly source: string; readonly value: number })
  | (Base & { readonly type: 'reward_imputed'; readonly traceId: string; readonly source: string; readonly value: number; readonly reason: string })
  | (Base & {
      readonly type: 'trace_settled';
      readonly traceId: string;
      readonly episode: number;
      readonly action: string;
      readonly params: JsonObject;
      readonly status: Exclude<TraceStatus, 'timeout'>;
      readonly observation?: JsonValue;
      readonly reward: number;
      readonly rewards: Readonly<Record<string, RewardEntry>>;
      readonly done: boolean;
      readonly seq: number;
      readonly durationMs: number;
      readonly error?: ErrorInfo;
    })
  | (Base & { readonly type: 'lifecycle_changed'; readonly from: LifecycleStatus; readonly to: LifecycleStatus; readonly episode: number })
  | (Base & { readonly type: 'loop_blocked'; readonly traceId: string; readonly tool: string; readonly blockedMs: number })
  /** The loop lagged and no single call's synchronous part explains it; `instanceId` is '' (env-wide). */
  | (Base & { readonly type: 'loop_lag'; readonly lagMs: number; readonly inFlight: readonly { readonly traceId: string; readonly tool: string }[] })
  | (Base & { readonly type: 'error'; readonly traceId?: string; readonly error: ErrorInfo });

export type EnvEventType = EnvEvent['type'];
export type EnvEventOf<T extends EnvEventType> = Extract<EnvEvent, { type: T }>;
