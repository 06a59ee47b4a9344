/**
 * OpenTelemetry traces of a run, built from its events: nothing in the step path knows about them.
 * Loaded (with the SDK and the OTLP exporter) only when tracing is on: see otel-config.ts.
 *
 * One trace per episode. Its spans, with the ids trace-context.ts derives, so a tool that received
 * a `traceparent` finds its call's span under it:
 *   episode <n>                       root: run, env, policy, how it ended, its reward
 *     step <k>                        one per settled step: action, status, seq, reward; the step's
 *                                     immediate rewards as `reward` events
 *       execute_tool <tool>           the call (GenAI semantic conventions: gen_ai.tool.*)
 *       chat <model>                  an LLM judge's call on the step (GenAI: gen_ai.usage.*)
 *     chat <model>                    the policy's (or its simulated user's) model calls
 *     reward <source>                 a value that landed after its step: from the step to its
 *                                     arrival, linked to the step (late, imputed and failed too)
 * Every span is made whole when its end is known (a step's span when it settles, from its start
 * time): events arrive in any order across episodes and a span never waits open in memory.
 */
import { randomBytes } from 'node:crypto';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Attributes, type Link } from '@opentelemetry/api';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BasicTracerProvider, type IdGenerator, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { RunEvent, SettledStepEvent } from '../events/run-events.js';
import type { EnvEventOf } from '../events/env-events.js';
import { TOOLKIT_NAME, TOOLKIT_VERSION } from '../shared/package-info.js';
import type { OtelConfig } from './otel-config.js';
import type { EventSource } from './prometheus.js';
import { BoundedSpanExport, type SpanExportStats } from './span-export.js';
import type { RunTraceIds } from './trace-context.js';

/** What `summary.json` says of a traced run's spans. */
export interface TraceSummary extends SpanExportStats {
  readonly endpoint: string;
}

/** The run a tracer traces: its root spans carry these. */
export interface TracedRun {
  readonly env: string;
  readonly policy: string;
}

interface SpanSpec {
  readonly name: string;
  readonly kind?: SpanKind;
  readonly trace: string;
  readonly span: string;
  readonly parent?: string;
  readonly start: number;
  readonly end: number;
  readonly attributes: Attributes;
  readonly events?: readonly { readonly name: string; readonly attributes: Attributes; readonly time: number }[];
  readonly links?: readonly Link[];
  readonly error?: string;
}

type RewardLanded = EnvEventOf<'reward_arrived' | 'reward_late' | 'reward_imputed' | 'reward_failed'>;

export class RunTracer implements AsyncDisposable {
  readonly #ids: RunTraceIds;
  readonly #run: TracedRun;
  readonly #endpoint: string;
  readonly #export: BoundedSpanExport;
  readonly #provider: BasicTracerProvider;
  readonly #tracer: ReturnType<BasicTracerProvider['getTracer']>;
  /** The ids the SDK takes for the span being started: ours, not random ones (see trace-context.ts). */
  readonly #next = { trace: '', span: '' };
  /** Trace ids by instance, for the episodes running (a hash each time would do; this saves it). */
  readonly #traces = new Map<string, string>();
  readonly #subscriptions: (() => void)[] = [];
  #summary: Promise<TraceSummary> | undefined;

  private constructor(ids: RunTraceIds, run: TracedRun, config: OtelConfig, exporter: SpanExporter) {
    this.#ids = ids;
    this.#run = run;
    this.#endpoint = config.endpoint;
    this.#export = new BoundedSpanExport(exporter, exportOptions(process.env));
    const next = this.#next;
    const idGenerator: IdGenerator = { generateTraceId: () => next.trace, generateSpanId: () => next.span };
    const resource = resourceFromAttributes({ 'service.name': TOOLKIT_NAME, 'service.version': TOOLKIT_VERSION }).merge(detectResources({ detectors: [envDetector] }));
    this.#provider = new BasicTracerProvider({ resource, idGenerator, sampler: new AlwaysOnSampler(), spanProcessors: [this.#export] });
    this.#tracer = this.#provider.getTracer(TOOLKIT_NAME, TOOLKIT_VERSION);
  }

  /** A tracer exporting over OTLP/HTTP as `config` says. */
  static async start(config: OtelConfig, ids: RunTraceIds, run: TracedRun): Promise<RunTracer> {
    const options = { url: config.endpoint, ...(config.headers ? { headers: { ...config.headers } } : {}) };
    const exporter =
      config.protocol === 'http/json'
        ? new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter(options)
        : new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter(options);
    return RunTracer.withExporter(ids, run, config, exporter);
  }

  /** A tracer over any exporter (tests, an in-memory one). */
  static withExporter(ids: RunTraceIds, run: TracedRun, config: OtelConfig, exporter: SpanExporter): RunTracer {
    return new RunTracer(ids, run, config, exporter);
  }

  /** Traces a run's events; returns the unsubscribe. */
  observe(events: EventSource<RunEvent>): () => void {
    const off = events.onAny((e) => this.#on(e));
    this.#subscriptions.push(off);
    return off;
  }

  /**
   * Stops tracing and exports what is left, for as long as `signal` allows (a collector that is
   * down costs the run at most that); what never reached it is counted as dropped.
   */
  finish(signal: AbortSignal = AbortSignal.timeout(5_000)): Promise<TraceSummary> {
    this.#summary ??= (async () => {
      for (const off of this.#subscriptions.splice(0)) off();
      const stats = await this.#export.finish(signal);
      return { endpoint: this.#endpoint, ...stats };
    })();
    return this.#summary;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.finish();
  }

  #on(e: RunEvent): void {
    switch (e.type) {
      case 'tool_finished':
        return this.#tool(e);
      case 'trace_settled':
        return this.#step(e);
      case 'episode_finished':
        return this.#episode(e);
      case 'reward_arrived':
      case 'reward_late':
        // A tool's own value lands with its step: it is one of the step's reward events.
        if (e.key === 'tool') return;
        return this.#reward(e);
      case 'reward_imputed':
      case 'reward_failed':
        return this.#reward(e);
      case 'llm_call':
        return this.#chat(e);
      default:
        return;
    }
  }

  #traceOf(instanceId: string): string | undefined {
    let id = this.#traces.get(instanceId);
    if (id === undefined) {
      id = this.#ids.traceId(instanceId);
      this.#traces.set(instanceId, id);
    }
    return this.#ids.sampled(id) ? id : undefined;
  }

  #tool(e: EnvEventOf<'tool_finished'>): void {
    const traceId = this.#traceOf(e.instance_id);
    if (traceId === undefined) return;
    this.#emit({
      name: `execute_tool ${e.tool}`,
      trace: traceId,
      span: this.#ids.spanId('tool', e.trace_id),
      parent: this.#ids.spanId('step', e.trace_id),
      start: e.time - e.duration_ms,
      end: e.time,
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': e.tool,
        'gen_ai.tool.type': 'function',
        'gen_ai.tool.call.id': e.trace_id,
        'agent.tool.attempts': e.attempts,
        ...(e.fallback !== undefined ? { 'agent.tool.fallback': e.fallback } : {}),
        ...(e.error ? { 'error.type': e.error.code } : {}),
      },
      ...(e.error ? { error: e.error.message } : {}),
    });
  }

  #step(e: SettledStepEvent): void {
    const traceId = this.#traceOf(e.instance_id);
    if (traceId === undefined) return;
    const rewards = Object.entries(e.rewards).filter(([, r]) => r.status !== 'pending');
    this.#emit({
      name: `step ${e.step}`,
      trace: traceId,
      span: this.#ids.spanId('step', e.trace_id),
      parent: this.#ids.spanId('episode', e.instance_id),
      start: e.time - e.duration_ms,
      end: e.time,
      attributes: {
        'agent.trace_id': e.trace_id,
        'agent.episode': e.episode,
        'agent.step': e.step,
        'agent.action': e.action,
        'agent.step.status': e.status,
        'agent.seq': e.seq,
        'agent.reward': e.reward,
        'agent.done': e.done,
        'agent.rewards.pending': Object.values(e.rewards).filter((r) => r.status === 'pending').length,
        ...(e.error ? { 'error.type': e.error.code } : {}),
      },
      events: rewards.map(([source, r]) => ({ name: 'reward', time: e.time, attributes: { 'agent.reward.source': source, 'agent.reward.status': r.status, ...(r.value !== null ? { 'agent.reward.value': r.value } : {}) } })),
      ...(e.error ? { error: e.error.message } : {}),
    });
  }

  #episode(e: Extract<RunEvent, { type: 'episode_finished' }>): void {
    const traceId = this.#traceOf(e.instance_id);
    this.#traces.delete(e.instance_id);
    if (traceId === undefined) return;
    this.#emit({
      name: `episode ${e.episode}`,
      trace: traceId,
      span: this.#ids.spanId('episode', e.instance_id),
      start: e.time - e.duration_ms,
      end: e.time,
      attributes: {
        'agent.run.id': this.#ids.runId,
        'agent.env': this.#run.env,
        'agent.policy': this.#run.policy,
        'agent.episode': e.episode,
        'agent.instance.id': e.instance_id,
        'agent.episode.reason': e.reason,
        'agent.episode.steps': e.steps,
        'agent.reward': e.reward,
        ...(e.error ? { 'error.type': e.error.code } : {}),
      },
      ...(e.error ? { error: e.error.message } : {}),
    });
  }

  #reward(e: RewardLanded): void {
    const traceId = this.#traceOf(e.instance_id);
    if (traceId === undefined) return;
    const status = { reward_arrived: 'arrived', reward_late: 'late', reward_imputed: 'imputed', reward_failed: 'failed' }[e.type];
    const delay = 'delay_ms' in e ? e.delay_ms : 0;
    this.#emit({
      name: `reward ${e.source}`,
      trace: traceId,
      span: this.#ids.spanId('reward', `${e.trace_id}\0${e.source}\0${e.type}`),
      parent: this.#ids.spanId('episode', e.instance_id),
      start: e.time - delay,
      end: e.time,
      attributes: {
        'agent.trace_id': e.trace_id,
        'agent.episode': e.episode,
        'agent.step': e.step,
        'agent.reward.source': e.source,
        'agent.reward.status': status,
        ...('value' in e ? { 'agent.reward.value': e.value } : {}),
        ...('delay_ms' in e ? { 'agent.reward.delay_ms': e.delay_ms, 'agent.reward.late': e.type === 'reward_late' } : {}),
        ...('reason' in e ? { 'agent.reward.reason': e.reason } : {}),
      },
      links: [{ context: { traceId, spanId: this.#ids.spanId('step', e.trace_id), traceFlags: TraceFlags.SAMPLED }, attributes: { 'agent.link': 'step' } }],
      ...(e.type === 'reward_failed' ? { error: e.reason } : {}),
    });
  }

  #chat(e: EnvEventOf<'llm_call'>): void {
    const traceId = this.#traceOf(e.instance_id);
    if (traceId === undefined) return;
    this.#emit({
      name: `chat ${e.model}`,
      kind: SpanKind.CLIENT,
      trace: traceId,
      // Nothing outside needs this span's id: a random one.
      span: randomBytes(8).toString('hex'),
      parent: e.trace_id !== undefined ? this.#ids.spanId('step', e.trace_id) : this.#ids.spanId('episode', e.instance_id),
      start: e.time - e.duration_ms,
      end: e.time,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': e.provider,
        'gen_ai.request.model': e.model,
        'gen_ai.usage.input_tokens': e.input_tokens,
        'gen_ai.usage.output_tokens': e.output_tokens,
        'agent.llm.role': e.role,
        'agent.episode': e.episode,
        'agent.step': e.step,
        ...(e.source !== undefined ? { 'agent.reward.source': e.source } : {}),
        ...(e.error !== undefined ? { 'error.type': 'LLM_FAILED' } : {}),
      },
      ...(e.error !== undefined ? { error: e.error } : {}),
    });
  }

  #emit(spec: SpanSpec): void {
    this.#next.trace = spec.trace;
    this.#next.span = spec.span;
    const parent = spec.parent === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, { traceId: spec.trace, spanId: spec.parent, traceFlags: TraceFlags.SAMPLED });
    const span = this.#tracer.startSpan(spec.name, { kind: spec.kind ?? SpanKind.INTERNAL, startTime: spec.start, attributes: spec.attributes, ...(spec.links ? { links: [...spec.links] } : {}) }, parent);
    for (const event of spec.events ?? []) span.addEvent(event.name, event.attributes, event.time);
    if (spec.error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: spec.error });
    span.end(spec.end);
  }
}

/** The batch processor's standard variables. */
function exportOptions(env: Readonly<Record<string, string | undefined>>): { maxQueue?: number; batch?: number; delayMs?: number } {
  const read = (name: string): number | undefined => {
    const v = Number(env[name]);
    return env[name] !== undefined && Number.isFinite(v) && v > 0 ? v : undefined;
  };
  const maxQueue = read('OTEL_BSP_MAX_QUEUE_SIZE');
  const batch = read('OTEL_BSP_MAX_EXPORT_BATCH_SIZE');
  const delayMs = read('OTEL_BSP_SCHEDULE_DELAY');
  return { ...(maxQueue !== undefined ? { maxQueue } : {}), ...(batch !== undefined ? { batch } : {}), ...(delayMs !== undefined ? { delayMs } : {}) };
}
