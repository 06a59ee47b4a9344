/**
 * One call of an agent instance as the instance keeps it (a Trace), and the helpers its dispatch
 * and settle share: copying a caller's JSON, locating issues, errors as event records. Internal to src/env.
 */
import type { StepRewards } from '../reward/step-rewards.js';
import type { ActionDefinition } from '../schema/definition.js';
import { AgentError, isAgentError, ValidationError, type AgentError as AgentErrorType, describeError, type Issue } from '../shared/errors.js';
import { jsonCopy, valueAtPointer, type JsonObject, type JsonValue, type NotJsonError } from '../shared/json.js';
import type { OutcomeSink, ToolCall, ToolCallOutcome } from '../tools/router.js';
import type { LiveControllers } from '../tools/timed-attempt.js';
import type { ToolResult } from '../tools/types.js';
import type { ErrorInfo } from '../events/env-events.js';
import type { StepResult } from './instance-types.js';

/** What every call of one instance shares: where its outcome goes. */
export interface Lane {
  readonly take: (trace: Trace, outcome: ToolCallOutcome) => void;
}

/**
 * One call of this instance: what the router runs (a ToolCall) and what takes its outcome (an
 * OutcomeSink), as one object per step instead of a call record and a closure besides.
 */
export class Trace implements ToolCall, OutcomeSink {
  readonly traceId: string;
  readonly action: ActionDefinition;
  readonly params: JsonObject;
  readonly episode: number;
  /** Which reset the trace belongs to: episode labels may repeat, generations do not. */
  readonly generation: number;
  readonly seqBefore: number;
  /** The state the call was dispatched on (its tool's `ctx.state`). */
  readonly state: JsonValue;
  readonly startedAt: number;
  readonly instanceId: string;
  readonly signal: AbortSignal;
  readonly live: LiveControllers;
  readonly #lane: Lane;
  /**
   * Resolves with the final result. Made only when someone waits before the trace settled: a
   * promise per call that nobody awaits is garbage the collector copies while the call runs.
   */
  settled?: Promise<StepResult>;
  resolveSettled?: (result: StepResult) => void;
  rejectSettled?: (err: unknown) => void;
  /** Settling itself threw (a bug, not a tool's failure): what waiters are rejected with. */
  broken?: { readonly error: unknown };
  /** Set as soon as an outcome is taken, so a late tool result after a cancellation is ignored. */
  taken = false;
  /** `resolve` was called without a deadline: the trace is forgotten as soon as it settles. */
  claimed = false;
  final?: StepResult;

  // Positional, not an options object: one allocation per step fewer, before the optimiser runs.
  constructor(lane: Lane, instanceId: string, traceId: string, action: ActionDefinition, params: JsonObject, episode: number, generation: number, seqBefore: number, state: JsonValue, startedAt: number, signal: AbortSignal, live: LiveControllers) {
    this.#lane = lane;
    this.instanceId = instanceId;
    this.traceId = traceId;
    this.action = action;
    this.params = params;
    this.episode = episode;
    this.generation = generation;
    this.seqBefore = seqBefore;
    this.state = state;
    this.startedAt = startedAt;
    this.signal = signal;
    this.live = live;
  }

  toolSettled(outcome: ToolCallOutcome): void {
    this.#lane.take(this, outcome);
  }
}

/**
 * An instance's traces not yet handed out, by id. Most agents have one call at a time: that one is
 * held in a field, and a Map is used only while several are. (A Map that gains and loses its one
 * entry every step reallocates its table at each delete: 150 bytes and a runtime call per step,
 * bench/cold-start.bench.ts.) The single trace is always older than those in the Map: a new trace
 * takes the field only when nothing else is held.
 */
export class TraceTable {
  #solo: Trace | undefined;
  #many: Map<string, Trace> | undefined;

  get size(): number {
    return (this.#solo ? 1 : 0) + (this.#many?.size ?? 0);
  }

  get(traceId: string): Trace | undefined {
    return this.#solo?.traceId === traceId ? this.#solo : this.#many?.get(traceId);
  }

  add(trace: Trace): void {
    if (!this.#solo && (this.#many === undefined || this.#many.size === 0)) this.#solo = trace;
    else (this.#many ??= new Map()).set(trace.traceId, trace);
  }

  /** Removes `trace` itself (not another trace under its id). */
  delete(trace: Trace): void {
    if (this.#solo === trace) this.#solo = undefined;
    else if (this.#many?.get(trace.traceId) === trace) this.#many.delete(trace.traceId);
  }

  /** Oldest first, as a copy: callers settle (and so delete) traces while they walk it. */
  values(): Trace[] {
    const out = this.#solo ? [this.#solo] : [];
    if (this.#many) for (const t of this.#many.values()) out.push(t);
    return out;
  }

  clear(): void {
    this.#solo = undefined;
    this.#many?.clear();
  }
}

/** A commit's product, before the step is numbered. */
export interface Committed {
  readonly state: JsonValue;
  readonly seq: number;
  readonly rewards: StepRewards;
  readonly result: ToolResult;
}

export function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return value instanceof Promise;
}

const ONCE = { remember: false } as const;
const REMEMBERED = {} as const;

/** A frozen JSON copy of a caller's value, or a typed error naming where it is not JSON. */
export function copyOrRefuse(value: unknown, code: 'PARAMS_INVALID' | 'STATE_INVALID', what: string): JsonValue {
  try {
    // Params are copied once per call and never handed back: not worth remembering (json.ts).
    return jsonCopy(value, code === 'PARAMS_INVALID' ? ONCE : REMEMBERED);
  } catch (err) {
    const e = err as NotJsonError;
    throw new ValidationError(code, `${what} is not JSON`, [{ pointer: e.pointer, message: e.reason }], 'Pass plain JSON: objects, arrays, strings, finite numbers, booleans and null.');
  }
}

/** Issues located in `doc`, each with the value it points at (what the debug console shows). */
export function withValues(issues: readonly Issue[], doc: JsonValue): Issue[] {
  return issues.map((i) => {
    const value = valueAtPointer(doc, i.pointer);
    return value === undefined ? i : Object.assign({}, i, { value });
  });
}

export function asAgentError(err: unknown): AgentErrorType {
  return isAgentError(err) ? err : new AgentError('INTERNAL', describeError(err), { cause: err });
}

/** Violations named in events: enough to find them, not a flood. */
const MAX_EVENT_ISSUES = 20;

export function errorInfo(err: AgentErrorType): ErrorInfo {
  const tool = (err as { tool?: unknown }).tool;
  const issues = Array.isArray((err as { issues?: unknown }).issues) ? (err as ValidationError).issues.slice(0, MAX_EVENT_ISSUES).map((i) => ({ pointer: i.pointer, message: i.message, ...(i.value !== undefined ? { value: i.value as JsonValue } : {}) })) : [];
  return {
    code: err.code,
    message: err.message,
    ...(err.hint ? { hint: err.hint } : {}),
    ...(typeof tool === 'string' ? { tool } : {}),
    ...(err.retryable ? { retryable: true } : {}),
    ...(issues.length > 0 ? { issues } : {}),
  };
}
