/**
 * What a run sends over OTLP: its traces (otel-traces.ts) and, when the endpoint takes them, its
 * metrics (otlp-metrics.ts). One handle for the run to start, feed and finish, and one record of
 * what reached the collector for summary.json (`telemetry`).
 */
import type { RunEvent } from '../events/run-events.js';
import type { OtelConfig } from './otel-config.js';
import { RunTracer, type TracedRun, type TraceSummary } from './otel-traces.js';
import { OtlpMetricsPush, type MetricsPushStats } from './otlp-metrics.js';
import type { EventSource, RunMetrics } from './prometheus.js';
import type { RunTraceIds } from './trace-context.js';

/** summary.json `telemetry`: where the spans and metrics went, and what did not get there. */
export interface TelemetrySummary {
  readonly traces: TraceSummary;
  readonly metrics?: MetricsPushStats & { readonly endpoint: string };
}

interface MetricsTarget {
  readonly push: OtlpMetricsPush;
  readonly endpoint: string;
}

export class RunTelemetry implements AsyncDisposable {
  readonly #tracer: RunTracer;
  readonly #metrics: MetricsTarget | undefined;
  #finished: Promise<TelemetrySummary> | undefined;

  private constructor(tracer: RunTracer, metrics: MetricsTarget | undefined) {
    this.#tracer = tracer;
    this.#metrics = metrics;
  }

  /** `metrics`: the run's Prometheus metrics, pushed too when `config.metrics` says where. */
  static async start(config: OtelConfig, ids: RunTraceIds, run: TracedRun, metrics: RunMetrics | undefined): Promise<RunTelemetry> {
    const tracer = await RunTracer.start(config, ids, run);
    const push = config.metrics && metrics ? await OtlpMetricsPush.start(config, metrics) : undefined;
    return new RunTelemetry(tracer, push && config.metrics ? { push, endpoint: config.metrics.endpoint } : undefined);
  }

  observe(events: EventSource<RunEvent>): () => void {
    return this.#tracer.observe(events);
  }

  /** The last spans and the last push, each for at most 5 s. */
  finish(): Promise<TelemetrySummary> {
    this.#finished ??= (async () => {
      const [traces, metrics] = await Promise.all([this.#tracer.finish(), this.#metrics?.push.finish()]);
      return { traces, ...(metrics && this.#metrics ? { metrics: { endpoint: this.#metrics.endpoint, ...metrics } } : {}) };
    })();
    return this.#finished;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.finish();
  }
}
