/**
 * `agentic-rl-toolkit/observe`: a run's metrics (Prometheus) and traces (OpenTelemetry over OTLP):
 * the configuration read from OpenTelemetry's own variables, and what was sent.
 *
 * @module agentic-rl-toolkit/observe
 */
export { RunMetrics, type MetricsPage } from './observe/prometheus.js';
export { otelConfig, type OtelConfig, type OtlpProtocol } from './observe/otel-config.js';
export type { TraceSummary } from './observe/otel-traces.js';
export type { TelemetrySummary } from './observe/telemetry.js';
