/** A fuzz case and its outcome: plain JSON, so a case can be saved, replayed and shrunk. */
import type { JsonObject, JsonValue } from '../shared/json.js';

export type CaseKind = 'valid' | 'invalid' | 'boundary-inside' | 'boundary-outside' | 'disabled';

/** One generated case: its id and seed, the action, its kind (valid, boundary, mutated), the params and the state it runs on. */
export interface FuzzCase {
  /** `<action>#<seed>.<index>`; with the same env, the same id is the same case. */
  readonly id: string;
  readonly seed: number;
  readonly index: number;
  readonly action: string;
  readonly kind: CaseKind;
  readonly params: JsonObject;
  readonly state: JsonValue;
  /** For invalid cases: what was broken, and where. */
  readonly mutation?: string;
  readonly pointer?: string;
}

/** The name of a fuzz check (`no-crash`, `state-valid`, `rejects-invalid`, …). */
export type CheckName =
  | 'accepts-valid'
  | 'no-crash'
  | 'no-timeout'
  | 'state-valid'
  | 'result-contract'
  | 'rejects-invalid'
  | 'refuses-disabled'
  | 'no-loop-block'
  | 'deterministic';

/** Every fuzz check, in the order they run. */
export const CHECKS: readonly CheckName[] = ['accepts-valid', 'no-crash', 'no-timeout', 'state-valid', 'result-contract', 'rejects-invalid', 'refuses-disabled', 'no-loop-block', 'deterministic'];

/** What each fuzz check asserts, one sentence each. */
export const CHECK_DESCRIPTIONS: Readonly<Record<CheckName, string>> = {
  'accepts-valid': 'a valid, enabled call is accepted',
  'no-crash': 'the tool does not crash or throw an untyped error',
  'no-timeout': 'the tool finishes within its timeout',
  'state-valid': 'the state the tool produces matches the state schema',
  'result-contract': 'the result has the handler shape and its rewards respect the reward schema',
  'rejects-invalid': 'an invalid call is rejected by validation naming the JSON pointer, and the tool is never invoked',
  'refuses-disabled': 'a disabled action is refused',
  'no-loop-block': 'no handler blocks the event loop past the threshold',
  deterministic: 'the same case has the same outcome when run again',
};

/** Why a case broke a check: the check, an error code and a message. */
export interface Failure {
  readonly check: CheckName;
  /** Error code seen (or what went wrong, for checks without one). */
  readonly code: string;
  readonly message: string;
}

/** `check:action:code`: failures with one signature are one bug. */
export function signatureOf(action: string, f: Failure): string {
  return `${f.check}:${action}:${f.code}`;
}
