/**
 * The run's Prometheus metrics (prometheus.ts), pushed over OTLP as well when an OTLP endpoint is
 * set: the same names, labels and buckets, so a dashboard reads alike from either. One set of
 * instruments, not two: each push reads prom-client's registry and hands the official OTLP metrics
 * exporter what it holds (counters as cumulative monotonic sums, gauges, histograms with their
 * bucket bounds). Pushed every OTEL_METRIC_EXPORT_INTERVAL (default 60 s) and once as the run ends.
 */
import { hrTime } from '@opentelemetry/core';
import { detectResources, envDetector, resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { AggregationTemporality, DataPointType, type MetricData, type PushMetricExporter, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { ValueType, type Attributes, type HrTime } from '@opentelemetry/api';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import { raceAbort } from '../shared/abort.js';
import { UNFINISHED_EXPORT } from './span-export.js';
import { TOOLKIT_NAME, TOOLKIT_VERSION } from '../shared/package-info.js';
import type { OtelConfig } from './otel-config.js';
import type { RunMetrics } from './prometheus.js';

export interface MetricsPushStats {
  readonly pushes: number;
  readonly failed: number;
  readonly error?: string;
}

export class OtlpMetricsPush {
  readonly #metrics: RunMetrics;
  readonly #exporter: PushMetricExporter;
  readonly #resource: Resource;
  readonly #start: HrTime = hrTime();
  readonly #timer: NodeJS.Timeout;
  #inFlight: Promise<void> | undefined;
  #pushes = 0;
  #failed = 0;
  #error: string | undefined;
  #finished: Promise<MetricsPushStats> | undefined;

  private constructor(metrics: RunMetrics, exporter: PushMetricExporter, intervalMs: number) {
    this.#metrics = metrics;
    this.#exporter = exporter;
    this.#resource = resourceFromAttributes({ 'service.name': TOOLKIT_NAME, 'service.version': TOOLKIT_VERSION }).merge(detectResources({ detectors: [envDetector] }));
    this.#timer = setInterval(() => void this.#push(), intervalMs);
    // A push waiting for its turn never keeps a finished process alive: `finish` pushes the last one.
    this.#timer.unref();
  }

  static async start(config: OtelConfig, metrics: RunMetrics): Promise<OtlpMetricsPush | undefined> {
    const target = config.metrics;
    if (!target) return undefined;
    const options = { url: target.endpoint, temporalityPreference: AggregationTemporality.CUMULATIVE, ...(config.headers ? { headers: { ...config.headers } } : {}) };
    const exporter =
      config.protocol === 'http/json'
        ? new (await import('@opentelemetry/exporter-metrics-otlp-http')).OTLPMetricExporter(options)
        : new (await import('@opentelemetry/exporter-metrics-otlp-proto')).OTLPMetricExporter(options);
    return new OtlpMetricsPush(metrics, exporter, target.intervalMs);
  }

  /** Pushes once more (what the run ended with), for as long as `signal` allows, and stops. */
  finish(signal: AbortSignal = AbortSignal.timeout(5_000)): Promise<MetricsPushStats> {
    this.#finished ??= (async () => {
      clearInterval(this.#timer);
      await raceAbort(this.#inFlight ?? Promise.resolve(), signal).catch(() => undefined);
      await raceAbort(this.#push(), signal).catch(() => {
        this.#failed++;
        this.#error = UNFINISHED_EXPORT;
      });
      void this.#exporter.shutdown().catch(() => undefined);
      return { pushes: this.#pushes, failed: this.#failed, ...(this.#error !== undefined ? { error: this.#error } : {}) };
    })();
    return this.#finished;
  }

  /** One push; skipped while the previous one is still out (a slow collector gets fewer, not more). */
  #push(): Promise<void> {
    if (this.#inFlight) return this.#inFlight;
    // Counted as it starts: one the collector never answers is a push that failed, not none.
    this.#pushes++;
    const push = (async () => {
      const metrics = toOtlp(await this.#metrics.json(), this.#start, hrTime());
      await new Promise<void>((resolve) => {
        this.#exporter.export({ resource: this.#resource, scopeMetrics: [{ scope: { name: TOOLKIT_NAME, version: TOOLKIT_VERSION }, metrics }] } satisfies ResourceMetrics, (result) => {
          if (result.code !== 0) {
            this.#failed++;
            this.#error = result.error?.message ?? 'the collector refused the push';
          }
          resolve();
        });
      });
    })().finally(() => {
      this.#inFlight = undefined;
    });
    this.#inFlight = push;
    return push;
  }
}

type PromMetric = MetricObjectWithValues<MetricValue<string>>;

/** prom-client's registry as OTLP metric data: counters cumulative from `start`, gauges now, histograms per label set. */
export function toOtlp(metrics: readonly PromMetric[], start: HrTime, now: HrTime): MetricData[] {
  const descriptor = (m: PromMetric): MetricData['descriptor'] => ({ name: m.name, description: m.help, unit: m.name.endsWith('_seconds') || m.name.endsWith('_seconds_total') ? 's' : m.name.endsWith('_bytes') ? 'By' : '', valueType: ValueType.DOUBLE });
  const point = <T>(attributes: Attributes, value: T): { startTime: HrTime; endTime: HrTime; attributes: Attributes; value: T } => ({ startTime: start, endTime: now, attributes, value });
  const out: MetricData[] = [];
  for (const m of metrics) {
    // prom-client's typings say a numeric enum; getMetricsAsJSON gives the type's name.
    const type = m.type as unknown as string;
    if (type === 'counter') {
      out.push({ descriptor: descriptor(m), aggregationTemporality: AggregationTemporality.CUMULATIVE, dataPointType: DataPointType.SUM, isMonotonic: true, dataPoints: m.values.map((v) => point(attributesOf(v.labels), v.value)) });
    } else if (type === 'gauge') {
      out.push({ descriptor: descriptor(m), aggregationTemporality: AggregationTemporality.CUMULATIVE, dataPointType: DataPointType.GAUGE, dataPoints: m.values.map((v) => point(attributesOf(v.labels), v.value)) });
    } else if (type === 'histogram') {
      out.push({ descriptor: descriptor(m), aggregationTemporality: AggregationTemporality.CUMULATIVE, dataPointType: DataPointType.HISTOGRAM, dataPoints: histogramPoints(m).map((h) => point(h.attributes, h.value)) });
    }
  }
  return out;
}

function attributesOf(labels: Readonly<Record<string, string | number | undefined>>): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(labels)) if (v !== undefined) Object.defineProperty(out, k, { value: String(v), enumerable: true });
  return out;
}

/** prom-client's `_bucket` (cumulative, by `le`), `_sum` and `_count` series, one histogram per label set. */
function histogramPoints(m: PromMetric): { attributes: Attributes; value: { buckets: { boundaries: number[]; counts: number[] }; sum: number; count: number } }[] {
  const series = new Map<string, { attributes: Attributes; le: Map<number, number>; sum: number; count: number }>();
  for (const v of m.values) {
    const { le, ...labels } = v.labels;
    const key = JSON.stringify(Object.entries(labels).sort());
    let s = series.get(key);
    if (!s) series.set(key, (s = { attributes: attributesOf(labels), le: new Map(), sum: 0, count: 0 }));
    const kind = (v as MetricValue<string> & { metricName?: string }).metricName ?? '';
    if (kind.endsWith('_bucket')) s.le.set(le === '+Inf' ? Infinity : Number(le), v.value);
    else if (kind.endsWith('_sum')) s.sum = v.value;
    else if (kind.endsWith('_count')) s.count = v.value;
  }
  return [...series.values()].map((s) => {
    const bounds = [...s.le.keys()].filter(Number.isFinite).sort((a, b) => a - b);
    const cumulative = [...bounds.map((b) => s.le.get(b) ?? 0), s.count];
    return { attributes: s.attributes, value: { buckets: { boundaries: bounds, counts: cumulative.map((c, i) => c - (i === 0 ? 0 : (cumulative[i - 1] as number))) }, sum: s.sum, count: s.count } };
  });
}
