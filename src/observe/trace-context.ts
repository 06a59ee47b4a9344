/**
 * W3C trace context for a run's calls, derived from ids the run already has.
 *
 * Every id is a hash of the run id and one of our own names: an episode's trace id of its instance
 * (`ep-3`), a step's and a tool call's span id of our trace id (`ep-3:7`). So whoever knows the run
 * id computes the same context without talking to anyone: the router hands a tool its `traceparent`
 * before any span exists, a worker's calls land under the coordinator's trace, and a span built
 * later from the run's events (otel-traces.ts) gets exactly the ids the tool already received.
 * Nothing here loads OpenTelemetry.
 */
import { createHash } from 'node:crypto';

/** How much of a run is traced: the share of episodes (by trace id) whose spans are kept. */
export interface TraceSampling {
  readonly ratio: number;
}

export type SpanRole = 'episode' | 'step' | 'tool' | 'reward';

export class RunTraceIds {
  readonly runId: string;
  readonly #threshold: number;

  constructor(runId: string, sampling: TraceSampling) {
    this.runId = runId;
    // The decision reads the trace id's last 8 hex digits, so every process decides alike.
    this.#threshold = Math.round(Math.min(1, Math.max(0, sampling.ratio)) * 0x1_0000_0000);
  }

  /** The 32-hex-digit trace id of an instance's episode. */
  traceId(instanceId: string): string {
    return nonZero(this.#hash(`trace\0${instanceId}`).slice(0, 32));
  }

  /** A span's 16-hex-digit id: the episode's (by instance id), a step's or a tool call's (by our trace id). */
  spanId(role: SpanRole, id: string): string {
    return nonZero(this.#hash(`${role}\0${id}`).slice(0, 16));
  }

  /** Whether an episode's spans are kept. */
  sampled(traceId: string): boolean {
    return Number.parseInt(traceId.slice(-8), 16) < this.#threshold;
  }

  /** The `traceparent` a tool call (our trace id `<instance>:<n>`) carries: its `execute_tool` span's context. */
  traceparent(callTraceId: string): string {
    const trace = this.traceId(callTraceId.slice(0, callTraceId.lastIndexOf(':')));
    return `00-${trace}-${this.spanId('tool', callTraceId)}-${this.sampled(trace) ? '01' : '00'}`;
  }

  #hash(name: string): string {
    return createHash('sha256').update(this.runId).update('\0').update(name).digest('hex');
  }
}

/** W3C forbids an all-zero id; a hash gives one with odds of 2^-64, but never hand one out. */
function nonZero(hex: string): string {
  return /^0+$/.test(hex) ? `${hex.slice(0, -1)}1` : hex;
}
