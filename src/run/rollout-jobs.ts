/**
 * Rollouts on workers: what `agent serve --workers` and `agent worker` say to each other through
 * Redis. A served run's rollout episode goes on the queue the distributed runs use (an entry of kind
 * `rollout`); a worker runs it whole, in memory, with the request's `llm:` agent against the
 * inference server, and delivers everything it recorded (its events, its record) onto the run's
 * results stream in the same script that takes the entry off the queue, fenced by its lease (see
 * `EpisodeQueue.deliver`). Nothing of a rollout episode is written while it runs: a worker that dies
 * leaves nothing behind, and the next one runs the episode again from its start, which is what a
 * token record needs (a conversation continued by another process would not be token-exact).
 *
 * Beside the queue: the run's meta (its env, seed, initial states), each request's agent, each
 * episode's job, the trainers' weight versions and pause state (a hash read on joining, and a
 * channel for changes), and the episodes cancelled.
 */
import type { RunEvent } from '../events/run-events.js';
import type { EpisodeRecord } from '../replay/run-writer.js';
import { AgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import type { PolicyTask } from './policy.js';

/** What a worker needs to run a served run's episodes: the env (checked by fingerprint), its options and its initial states. */
export interface RolloutRunMeta {
  readonly env: string;
  readonly env_dir: string;
  readonly env_fingerprint: string;
  readonly seed: number;
  readonly max_steps: number;
  readonly initial_states: readonly JsonValue[];
  readonly tool_options?: Readonly<Record<string, JsonValue>>;
  readonly reward_sources?: Readonly<Record<string, unknown>>;
}

/** A rollouts request's agent: an `llm:` model in token mode, served by `base_url`, told `system`. */
export interface RolloutAgentSpec {
  readonly model: string;
  readonly system: string;
  readonly seed: number;
  readonly base_url: string;
  readonly temperature: number;
  readonly top_p?: number;
  readonly max_tokens?: number;
  readonly tool_parser?: string;
  readonly max_context?: number;
}

/** One episode to run: its request's agent, the trainer connection whose weights and pause it follows, its task and initial state. */
export interface RolloutJob {
  readonly request: string;
  readonly control: string;
  readonly task: PolicyTask;
  readonly initial_index: number;
}

/** A trainer connection's weights and pause, as its workers follow them. */
export interface RolloutControl {
  readonly version: number | null;
  readonly paused: boolean;
}

/** On the run's channel: a connection's control changed, or episodes were cancelled. */
export type RolloutSignal = { readonly control: string; readonly state: RolloutControl } | { readonly cancel: readonly number[] };

/** What a worker delivers of an episode: every event it recorded of it, in order, and its record (none when it never started). */
export interface RolloutDelivery {
  readonly events: readonly RunEvent[];
  readonly record?: EpisodeRecord;
}

export interface RolloutKeys {
  readonly meta: string;
  /** Request id → its RolloutAgentSpec. */
  readonly requests: string;
  /** Episode → its RolloutJob. */
  readonly jobs: string;
  /** Control id → its RolloutControl. */
  readonly controls: string;
  /** Episodes cancelled (a worker claiming one ends it at once). */
  readonly cancelled: string;
  /** Delivered episodes, for the serving process. */
  readonly results: string;
  /** Control changes and cancels (pub/sub). */
  readonly channel: string;
}

export function rolloutKeys(runId: string): RolloutKeys {
  const base = `agent:${runId}:{${runId}}:rollouts:`;
  return { meta: `${base}meta`, requests: `${base}requests`, jobs: `${base}jobs`, controls: `${base}controls`, cancelled: `${base}cancelled`, results: `${base}results`, channel: `${base}channel` };
}

/** A value read back from Redis, checked to be an object with `fields`; a damaged one is an error naming the key. */
export function parseRolloutValue<T>(text: string, key: string, fields: readonly string[]): T {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const missing = value !== null && typeof value === 'object' ? fields.find((f) => !(f in value)) : fields[0];
  if (missing !== undefined) {
    throw new AgentError('STATE_CORRUPT', `${key} in Redis is not what agent serve wrote (no ${missing})`, { hint: 'Something else wrote this key, or the serving process is another version: restart the workers with the version of agent serve.' });
  }
  return value as T;
}
