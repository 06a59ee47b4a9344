/**
 * The run folder's reward log, `rewards.jsonl`: every change to a delayed reward (arrived,
 * late, imputed, failed, expected), in snake_case, appended and never rewritten. The run writes
 * it while live; `agent reward` appends to it after the run has exited. Folded over the step
 * records in `trajectories.jsonl`, it gives every step's rewards as they stand now.
 */
import { appendFile } from 'node:fs/promises';
import type { RewardEvent } from '../reward/ledger.js';
import type { CallCost } from '../events/env-events.js';

/** One line of a run folder's rewards.jsonl: a reward that arrived (or was late, imputed or failed) for a step, by source. */
export interface RewardLogRecord {
  readonly type: RewardEvent['type'];
  /** Event time of the change (epoch ms): the arrival, or the deadline that imputed. */
  readonly time: number;
  readonly trace_id: string;
  readonly instance_id: string;
  readonly episode: number;
  readonly step: number;
  readonly source: string;
  readonly value?: number;
  readonly key?: string;
  readonly delay_ms?: number;
  /** The step's reward after this change (final basis). */
  readonly reward?: number;
  readonly strategy?: 'value' | 'historical_mean';
  readonly sample_size?: number;
  readonly reason?: string;
  readonly deadline_at?: number;
  /** What an LLM judge's calls for this value cost. */
  readonly cost?: CallCost;
}

/** Whether an event belongs in the reward log: every reward change except a tool's own values (those are in the step's record). */
export function isLoggedReward(e: { readonly type: string; readonly key?: string }): e is RewardEvent {
  return e.type.startsWith('reward_') && !(e.type === 'reward_arrived' && e.key === 'tool');
}

/**
 * The rewards.jsonl line for a reward event. `Object.assign(base, …)` rather than `{ ...base, … }`: on
 * Node 20 a spread followed by keys gives every object a hidden class of its own (a served run keeps
 * the last 10,000 episodes' records, and every reader of them goes megamorphic).
 */
export function rewardRecord(e: RewardEvent): RewardLogRecord {
  const base = { type: e.type, time: e.time, trace_id: e.trace_id, instance_id: e.instance_id, episode: e.episode, step: e.step, source: e.source };
  switch (e.type) {
    case 'reward_arrived':
      return Object.assign(base, { value: e.value, key: e.key, delay_ms: e.delay_ms, reward: e.reward, ...(e.cost ? { cost: e.cost } : {}) });
    case 'reward_late':
      return Object.assign(base, { value: e.value, key: e.key, delay_ms: e.delay_ms, reward: e.reward });
    case 'reward_imputed':
      return Object.assign(base, { value: e.value, strategy: e.strategy, ...(e.sample_size !== undefined ? { sample_size: e.sample_size } : {}), reason: e.reason, reward: e.reward });
    case 'reward_failed':
      return Object.assign(base, { reason: e.reason });
    case 'reward_expected':
      return e.deadline_at !== undefined ? Object.assign(base, { deadline_at: e.deadline_at }) : base;
  }
}

/** The event a logged record stands for (the inverse of {@link rewardRecord}). */
export function rewardEvent(r: RewardLogRecord): RewardEvent {
  const base = { time: r.time, trace_id: r.trace_id, instance_id: r.instance_id, episode: r.episode, step: r.step, source: r.source };
  switch (r.type) {
    case 'reward_arrived':
    case 'reward_late':
      return Object.assign(base, { type: r.type, value: r.value ?? 0, key: r.key ?? 'default', delay_ms: r.delay_ms ?? 0, reward: r.reward ?? 0 });
    case 'reward_imputed':
      return Object.assign(base, { type: r.type, value: r.value ?? 0, strategy: r.strategy ?? 'value', ...(r.sample_size !== undefined ? { sample_size: r.sample_size } : {}), reason: r.reason ?? '', reward: r.reward ?? 0 });
    case 'reward_failed':
      return Object.assign(base, { type: r.type, reason: r.reason ?? '' });
    case 'reward_expected':
      return Object.assign(base, { type: r.type, ...(r.deadline_at !== undefined ? { deadline_at: r.deadline_at } : {}) });
  }
}

/** Append records in one write (O_APPEND): lines from concurrent writers never interleave mid-line. */
export async function appendRewardRecords(file: string, records: readonly RewardLogRecord[]): Promise<void> {
  if (records.length === 0) return;
  await appendFile(file, records.map((r) => `${JSON.stringify(r)}\n`).join(''), { flag: 'a' });
}
