/**
 * Whether, and where, a run sends its traces and metrics: OpenTelemetry's standard variables, or
 * `--otel <url>`. Read before anything loads, so a run without them never imports the SDK. The
 * endpoints are resolved here and handed to the exporters; the variables they read themselves
 * (headers, timeout, compression, certificates) are left to them.
 *
 * An endpoint's credentials (`http://user:pass@collector:4318`) never travel with it: they are
 * taken out of the URL into an `Authorization: Basic` header, so the endpoint that is printed,
 * written to `summary.json` or quoted in an exporter's error holds no secret.
 */
import { UsageError } from '../shared/errors.js';
import type { TraceSampling } from './trace-context.js';

/** How traces and metrics go to the collector: protobuf or JSON over HTTP. */
export type OtlpProtocol = 'http/protobuf' | 'http/json';

/** Where and how a run sends its telemetry over OTLP: endpoint, headers, protocol, trace sampling, and the metrics endpoint and interval. */
export interface OtelConfig {
  /** Where the traces go (OTLP/HTTP, the full URL, without credentials: safe to show and store). */
  readonly endpoint: string;
  /** Headers the exporters send besides those of OTEL_EXPORTER_OTLP_HEADERS: the endpoint's credentials, if its URL had some. Never shown. */
  readonly headers?: Readonly<Record<string, string>>;
  readonly protocol: OtlpProtocol;
  readonly sampling: TraceSampling;
  /** Metrics pushed over OTLP too: with `--otel`, OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, unless OTEL_METRICS_EXPORTER=none. */
  readonly metrics?: { readonly endpoint: string; readonly intervalMs: number };
}

type Env = Readonly<Record<string, string | undefined>>;

/** Undefined when tracing is off: no endpoint and no `--otel`, `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. */
export function otelConfig(env: Env = process.env, flagUrl?: string): OtelConfig | undefined {
  const tracesEndpoint = nonEmpty(env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']);
  const baseEndpoint = nonEmpty(env['OTEL_EXPORTER_OTLP_ENDPOINT']);
  if (flagUrl === undefined) {
    if (tracesEndpoint === undefined && baseEndpoint === undefined) return undefined;
    if (env['OTEL_SDK_DISABLED']?.trim().toLowerCase() === 'true') return undefined;
    if (env['OTEL_TRACES_EXPORTER']?.split(',').map((s) => s.trim()).includes('none')) return undefined;
  }
  const flag = flagUrl === undefined ? undefined : parseUrl(flagUrl, '--otel');
  const endpoint = flag ? tracesUrl(flag) : tracesEndpoint !== undefined ? parseUrl(tracesEndpoint, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT').href : tracesUrl(parseUrl(baseEndpoint ?? '', 'OTEL_EXPORTER_OTLP_ENDPOINT'));
  const metrics = metricsOf(env, flag, baseEndpoint);
  const traces = withoutCredentials(endpoint);
  const pushed = metrics ? withoutCredentials(metrics.endpoint) : undefined;
  // One collector, one set of credentials: those of the traces URL, else the metrics one's.
  const authorization = traces.authorization ?? pushed?.authorization;
  return {
    endpoint: traces.url,
    protocol: protocolOf(env),
    sampling: samplingOf(env),
    ...(authorization ? { headers: { Authorization: authorization } } : {}),
    ...(metrics && pushed ? { metrics: { ...metrics, endpoint: pushed.url } } : {}),
  };
}

/** A URL with its userinfo taken out, as a Basic authorization. */
function withoutCredentials(href: string): { url: string; authorization?: string } {
  const url = new URL(href);
  if (url.username === '' && url.password === '') return { url: href };
  const user = decodeURIComponent(url.username);
  const password = decodeURIComponent(url.password);
  url.username = '';
  url.password = '';
  return { url: url.href, authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` };
}

/** An endpoint as it may be shown: its credentials replaced by `***` (for a URL read before otelConfig cleaned it, as in an error). */
export function redactEndpoint(value: string): string {
  return value.replace(/^(\w+:\/\/)[^/@\s]*@/, '$1***@');
}

function metricsOf(env: Env, flag: URL | undefined, baseEndpoint: string | undefined): OtelConfig['metrics'] {
  if (env['OTEL_METRICS_EXPORTER']?.split(',').map((s) => s.trim()).includes('none')) return undefined;
  const given = nonEmpty(env['OTEL_EXPORTER_OTLP_METRICS_ENDPOINT']);
  const endpoint = flag ? metricsUrl(flag) : given !== undefined ? parseUrl(given, 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT').href : baseEndpoint !== undefined ? metricsUrl(parseUrl(baseEndpoint, 'OTEL_EXPORTER_OTLP_ENDPOINT')) : undefined;
  if (endpoint === undefined) return undefined;
  const interval = nonEmpty(env['OTEL_METRIC_EXPORT_INTERVAL']) ?? '60000';
  const intervalMs = Number(interval);
  if (!(Number.isInteger(intervalMs) && intervalMs > 0)) throw new UsageError(`OTEL_METRIC_EXPORT_INTERVAL must be a whole number of milliseconds > 0 (got ${JSON.stringify(interval)})`, 'For example 10000 to push every 10 s.');
  return { endpoint, intervalMs };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value?.trim() ? value.trim() : undefined;
}

function parseUrl(value: string, name: string): URL {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new UsageError(`${name} must be an http(s) URL of an OTLP/HTTP receiver (got ${JSON.stringify(redactEndpoint(value))})`, 'For example http://localhost:4318 (a collector, Jaeger or Tempo listening for OTLP over HTTP).');
  }
  return url;
}

/** A base URL gets OTLP's traces path, as the spec says for OTEL_EXPORTER_OTLP_ENDPOINT; a URL with a path is used as it is. */
function tracesUrl(url: URL): string {
  return url.pathname === '/' || url.pathname === '' ? new URL('/v1/traces', url).href : url.href;
}

/** The metrics path beside the traces one: a base URL's `/v1/metrics`, or a traces URL's with `/v1/metrics` for its `/v1/traces`. */
function metricsUrl(url: URL): string | undefined {
  if (url.pathname === '/' || url.pathname === '') return new URL('/v1/metrics', url).href;
  return url.pathname.endsWith('/v1/traces') ? new URL(url.pathname.replace(/\/v1\/traces$/, '/v1/metrics'), url).href : undefined;
}

function protocolOf(env: Env): OtlpProtocol {
  const name = env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const value = nonEmpty(env[name]) ?? 'http/protobuf';
  if (value === 'http/protobuf' || value === 'http/json') return value;
  throw new UsageError(`${name}=${value} is not supported: traces go over OTLP/HTTP`, `Set ${name} to http/protobuf (the default) or http/json, and point the endpoint at the receiver's HTTP port (4318), not gRPC's (4317).`);
}

/** Episodes are the roots of their traces, so the parent-based samplers decide as their root ones. */
function samplingOf(env: Env): TraceSampling {
  const sampler = nonEmpty(env['OTEL_TRACES_SAMPLER'])?.toLowerCase() ?? 'parentbased_always_on';
  switch (sampler) {
    case 'always_on':
    case 'parentbased_always_on':
      return { ratio: 1 };
    case 'always_off':
    case 'parentbased_always_off':
      return { ratio: 0 };
    case 'traceidratio':
    case 'parentbased_traceidratio': {
      const arg = nonEmpty(env['OTEL_TRACES_SAMPLER_ARG']) ?? '1';
      const ratio = Number(arg);
      if (!(ratio >= 0 && ratio <= 1)) throw new UsageError(`OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1 (got ${JSON.stringify(arg)})`, 'For example 0.1 to trace one episode in ten.');
      return { ratio };
    }
    default:
      throw new UsageError(`OTEL_TRACES_SAMPLER=${sampler} is not supported`, 'Use always_on, always_off or traceidratio (with OTEL_TRACES_SAMPLER_ARG), or their parentbased_ forms.');
  }
}
