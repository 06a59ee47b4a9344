/**
 * A reward as it comes from outside (`agent reward`, `POST /rewards`, `env.rewards.submit`), and
 * the check that its fields have the types they must before the ledger reads any of them: a
 * hostile or careless client gets a REWARD_INVALID naming the field, never a TypeError.
 */
import { ValidationError, type Issue } from '../shared/errors.js';

/**
 * A reward delivered from outside (`agent reward`, `POST /rewards`, `env.rewards.submit`), in the
 * wire's snake_case. The step is named by `trace_id`, or by `episode` + `step`, or by `episode` +
 * `time` (the step whose state was current at that event time); `instance_id` disambiguates an
 * episode number that several instances used.
 */
export interface RewardDelivery {
  readonly source: string;
  readonly value: number | boolean;
  readonly trace_id?: string;
  readonly instance_id?: string;
  readonly episode?: number;
  readonly step?: number;
  /** Event time (epoch ms, or an ISO string on the wire) the reward is about. */
  readonly time?: number | string;
  /** Idempotency key: a second delivery with the same key for the same step and source is a no-op. Default: one value per step and source. */
  readonly key?: string;
}

/** The types each field of a delivery may have: a delivery from the wire is checked against these before any field is read. */
const DELIVERY_FIELDS: Readonly<Record<keyof RewardDelivery, { readonly ok: (v: unknown) => boolean; readonly want: string }>> = {
  source: { ok: (v) => typeof v === 'string', want: 'a string (a delayed source of reward_schema.json)' },
  value: { ok: (v) => typeof v === 'number' || typeof v === 'boolean', want: 'a number or a boolean' },
  trace_id: { ok: (v) => typeof v === 'string', want: 'a string (a trace id of trajectories.jsonl)' },
  instance_id: { ok: (v) => typeof v === 'string', want: 'a string (an instance id, ep-<n>)' },
  episode: { ok: Number.isInteger, want: 'an integer (an episode index)' },
  step: { ok: Number.isInteger, want: 'an integer (1-based step)' },
  time: { ok: (v) => typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v)), want: 'an ISO time string or epoch milliseconds' },
  key: { ok: (v) => typeof v === 'string', want: 'a non-empty string' },
};

/** A delivery whose fields have the wrong type is refused naming the field (never a TypeError from deep inside). */
export function checkDeliveryShape(d: unknown): asserts d is RewardDelivery {
  if (typeof d !== 'object' || d === null || Array.isArray(d)) throw invalid('a delivery must be an object', '', 'Send {trace_id, source, value} (or episode with step or time instead of trace_id).');
  for (const [field, rule] of Object.entries(DELIVERY_FIELDS)) {
    const v: unknown = (d as Record<string, unknown>)[field];
    if (v !== undefined && !rule.ok(v)) throw invalid(`${field} must be ${rule.want} (got ${describeJsonType(v)})`, `/${field}`, `Fix ${field} and send it again.`);
  }
}

function describeJsonType(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : typeof v === 'string' ? 'a string' : typeof v === 'number' ? String(v) : typeof v;
}

/** A delivery refused: REWARD_INVALID naming the field, with what to do. */
export function invalid(message: string, pointer: string, hint: string): ValidationError {
  const issues: Issue[] = [{ pointer, message }];
  return new ValidationError('REWARD_INVALID', 'reward not delivered', issues, `${hint} Nothing was written.`);
}
