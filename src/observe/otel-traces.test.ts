import { createServer, type IncomingHttpHeaders } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { otelConfig, readRunFolder, Run, type OtelConfig, type RunEvent } from '../internal.js';
import { FakeOtlpCollector, type ReceivedSpan } from './fake-otlp-collector.js';
import { Emitter } from '../shared/emitter.js';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { RunTracer } from './otel-traces.js';
import { BoundedSpanExport } from './span-export.js';
import { RunTraceIds } from './trace-context.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'agent-otel-'));
  dirs.push(d);
  return d;
}

const W3C_TRACE = /^(?!0{32})[0-9a-f]{32}$/;
const W3C_SPAN = /^(?!0{16})[0-9a-f]{16}$/;

/** Runs an env traced to `otel`, keeping every event it emitted. */
async function tracedRun(env: string, otel: OtelConfig, options: { episodes: number; maxSteps: number }): Promise<{ run: Run; events: RunEvent[] }> {
  const run = await Run.prepare({ env, ...options, concurrency: 2, seed: 3, out: await tempDir(), toolOptions: { latency_scale: 0 }, otel });
  const events: RunEvent[] = [];
  run.events.onAny((e) => events.push(e));
  await run.execute();
  return { run, events };
}

function byName(spans: readonly ReceivedSpan[], prefix: string): ReceivedSpan[] {
  return spans.filter((s) => s.name.startsWith(prefix));
}

describe('OpenTelemetry traces of a run', () => {
  it('sends one trace per episode over OTLP/protobuf whose spans account for every step, tool call and delayed reward', async () => {
    await using collector = await FakeOtlpCollector.start();
    const { run, events } = await tracedRun('fixtures/weather', otelConfig({}, collector.url) as OtelConfig, { episodes: 3, maxSteps: 3 });
    const summary = (await readRunFolder(run.dir as string)).summary as { telemetry?: { traces: { exported: number; dropped: number; endpoint: string }; metrics?: unknown }; config: { trace_sampling?: number } };
    const spans = collector.spans;
    expect(collector.contentTypes.every((t) => t === 'application/x-protobuf')).toBe(true);
    expect(summary.telemetry?.traces).toEqual({ endpoint: `${collector.url}/v1/traces`, exported: spans.length, dropped: 0 });
    expect(summary.config.trace_sampling).toBe(1);

    const episodes = byName(spans, 'episode ');
    expect(episodes.map((s) => s.name).sort()).toEqual(['episode 0', 'episode 1', 'episode 2']);
    expect(new Set(episodes.map((s) => s.traceId)).size).toBe(3);
    for (const s of spans) {
      expect(s.traceId).toMatch(W3C_TRACE);
      expect(s.spanId).toMatch(W3C_SPAN);
      expect(s.end).toBeGreaterThanOrEqual(s.start);
      expect(s.resource['service.name']).toBe('agentic-rl-toolkit');
    }
    const episodeOf = new Map(episodes.map((s) => [s.traceId, s]));
    expect(episodes.every((s) => s.parentSpanId === '' && s.attributes['agent.run.id'] === run.runId && s.attributes['agent.env'] === 'weather' && s.attributes['agent.episode.reason'] === 'max_steps')).toBe(true);

    // A step span per settled step, under its episode; its immediate rewards as events.
    const settled = events.filter((e): e is Extract<RunEvent, { type: 'trace_settled' }> => e.type === 'trace_settled');
    const steps = byName(spans, 'step ');
    expect(steps.map((s) => s.attributes['agent.trace_id']).sort()).toEqual(settled.map((e) => e.trace_id).sort());
    for (const step of steps) {
      expect(step.parentSpanId).toBe(episodeOf.get(step.traceId)?.spanId);
      expect(step.events.map((e) => e.attributes['agent.reward.source'])).toEqual(['api_latency']);
    }

    // A GenAI execute_tool span per call, under its step.
    const calls = events.filter((e) => e.type === 'tool_finished');
    const tools = byName(spans, 'execute_tool ');
    expect(tools).toHaveLength(calls.length);
    const stepOf = new Map(steps.map((s) => [s.attributes['agent.trace_id'], s]));
    for (const tool of tools) {
      const callId = tool.attributes['gen_ai.tool.call.id'] as string;
      expect(tool.attributes).toMatchObject({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': tool.name.slice('execute_tool '.length), 'agent.tool.attempts': 1 });
      expect(tool.parentSpanId).toBe(stepOf.get(callId)?.spanId);
      expect(tool.traceId).toBe(stepOf.get(callId)?.traceId);
    }

    // The judge's llm_score lands after its step: a span of its own, linked to the step.
    const rewards = byName(spans, 'reward llm_score');
    expect(rewards).toHaveLength(settled.length);
    for (const r of rewards) {
      const step = stepOf.get(r.attributes['agent.trace_id']) as ReceivedSpan;
      expect(r.links).toEqual([{ traceId: step.traceId, spanId: step.spanId, attributes: { 'agent.link': 'step' } }]);
      expect(r.parentSpanId).toBe(episodeOf.get(r.traceId)?.spanId);
      expect(r.attributes).toMatchObject({ 'agent.reward.source': 'llm_score', 'agent.reward.status': 'arrived', 'agent.reward.late': false });
      expect(typeof r.attributes['agent.reward.value']).toBe('number');
    }
    expect(spans).toHaveLength(episodes.length + steps.length + tools.length + rewards.length);

    // The run's metrics went too, once as it ended: the same names, labels and buckets as /metrics.
    expect(summary.telemetry?.metrics).toEqual({ endpoint: `${collector.url}/v1/metrics`, pushes: 1, failed: 0 });
    const points = collector.points;
    const resolved = points.find((p) => p.metric === 'agent_steps_total' && p.attributes['status'] === 'resolved');
    expect(resolved).toMatchObject({ kind: 'sum', value: settled.length, attributes: { run_id: run.runId }, resource: { 'service.name': 'agentic-rl-toolkit' } });
    const latency = points.filter((p) => p.metric === 'agent_tool_call_duration_seconds');
    expect(latency.map((p) => p.attributes['tool']).sort()).toEqual([...new Set(calls.map((c) => (c as { tool: string }).tool))].sort());
    expect(latency.reduce((n, p) => n + (p.count ?? 0), 0)).toBe(calls.length);
    for (const p of latency) {
      expect(p.bounds).toEqual([0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]);
      expect((p.buckets ?? []).reduce((a, b) => a + b, 0)).toBe(p.count);
    }
  });

  it('speaks OTLP/JSON too, and an HTTP tool receives the traceparent of its execute_tool span', async () => {
    const received: IncomingHttpHeaders[] = [];
    const service = createServer((req, res) => {
      received.push(req.headers);
      req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"observation": "ok"}'));
    });
    await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
    try {
      const dir = await tempDir();
      await writeFile(path.join(dir, 'state_schema.json'), JSON.stringify({ type: 'object', properties: { n: { type: 'integer' } } }));
      await writeFile(path.join(dir, 'actions.json'), JSON.stringify({ type: 'object', properties: { lookup: { type: 'object', params: { q: { type: 'string' } } } } }));
      await writeFile(path.join(dir, 'env.json'), JSON.stringify({ name: 'http-tool', state: 'state_schema.json', actions: 'actions.json', initial_states: [{ n: 0 }], tools: { lookup: { url: `http://127.0.0.1:${(service.address() as AddressInfo).port}/` } } }));
      await using collector = await FakeOtlpCollector.start();
      await tracedRun(dir, otelConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, collector.url) as OtelConfig, { episodes: 2, maxSteps: 2 });
      expect(collector.contentTypes.every((t) => t.startsWith('application/json'))).toBe(true);
      const tools = byName(collector.spans, 'execute_tool lookup');
      expect(tools).toHaveLength(4);
      // Each request carried its own call's span context: trace, span, sampled.
      expect(received.map((h) => h['traceparent']).sort()).toEqual(tools.map((s) => `00-${s.traceId}-${s.spanId}-01`).sort());
      expect(received.map((h) => h['x-trace-id']).sort()).toEqual(tools.map((s) => s.attributes['gen_ai.tool.call.id']).sort());
    } finally {
      service.closeAllConnections();
      await new Promise<void>((resolve) => service.close(() => resolve()));
    }
  });

  it('a collector that refuses costs the run nothing: every step runs, the spans are counted as dropped', async () => {
    await using collector = await FakeOtlpCollector.start({ status: 400 });
    const { run } = await tracedRun('fixtures/weather', otelConfig({}, collector.url) as OtelConfig, { episodes: 2, maxSteps: 3 });
    const folder = await readRunFolder(run.dir as string);
    const summary = folder.summary as { status: string; telemetry: { traces: { exported: number; dropped: number; error?: string }; metrics: unknown } };
    expect(summary.status).toBe('completed');
    expect(folder.trajectories).toHaveLength(6);
    expect(collector.spans).toHaveLength(0);
    // 2 episodes + 6 steps + 6 calls + 6 delayed rewards.
    expect(summary.telemetry.traces).toMatchObject({ exported: 0, dropped: 20, error: expect.stringMatching(/400|Bad Request/i) });
    expect(summary.telemetry.metrics).toMatchObject({ pushes: 1, failed: 1 });
  });

  it('a collector that never answers holds the end of a run only as long as its signal allows', async () => {
    const config = otelConfig({}, 'http://127.0.0.1:4318') as OtelConfig;
    const exported: number[] = [];
    let shutdowns = 0;
    // An export that never calls back: what a collector that accepts and hangs looks like from here.
    const exporter = { export: (spans: unknown[]) => void exported.push(spans.length), shutdown: () => new Promise<void>(() => void shutdowns++) };
    await using tracer = RunTracer.withExporter(new RunTraceIds('run-h', config.sampling), { env: 'e', policy: 'p' }, config, exporter);
    const events = new Emitter<RunEvent>();
    tracer.observe(events);
    for (let episode = 0; episode < 3; episode++) events.emit({ type: 'episode_finished', time: 1_000, instance_id: `ep-${episode}`, episode, steps: 0, reward: 0, reason: 'done', duration_ms: 10 });
    const stop = new AbortController();
    const finished = tracer.finish(stop.signal);
    await new Promise((resolve) => setImmediate(resolve));
    // The queued spans went out in one export, which never ends.
    expect(exported).toEqual([3]);
    stop.abort();
    expect(await finished).toMatchObject({ exported: 0, dropped: 3, error: expect.stringContaining('no export had succeeded when the run ended') });
    expect(shutdowns).toBe(1);
  });

  it('a queue that is full drops what does not fit, and counts it', async () => {
    const batches: number[] = [];
    const exporter = { export: (spans: unknown[]) => void batches.push(spans.length), shutdown: () => Promise.resolve() };
    const queue = new BoundedSpanExport(exporter, { maxQueue: 4, batch: 2 });
    for (let i = 0; i < 10; i++) queue.onEnd({} as ReadableSpan);
    // Two went out (a full batch goes at once, the export never ends), four wait, four had no room.
    expect(batches).toEqual([2]);
    const stop = new AbortController();
    stop.abort();
    expect(await queue.finish(stop.signal)).toMatchObject({ exported: 0, dropped: 10 });
  });

  it('a sampled-out run exports nothing and hands its tools an unsampled context', async () => {
    await using collector = await FakeOtlpCollector.start();
    const config = otelConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_TRACES_SAMPLER: 'always_off' }) as OtelConfig;
    const { run } = await tracedRun('fixtures/weather', config, { episodes: 2, maxSteps: 2 });
    expect(collector.spans).toHaveLength(0);
    expect(((await readRunFolder(run.dir as string)).summary as { telemetry: { traces: unknown } }).telemetry.traces).toMatchObject({ exported: 0, dropped: 0 });
    expect(new RunTraceIds(run.runId, config.sampling).traceparent('ep-0:1')).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
  });
});

describe('RunTraceIds', () => {
  it('derives the same ids for the same run and names, other ids for another run, and samples by trace id', () => {
    const a = new RunTraceIds('run-a', { ratio: 1 });
    expect(a.traceId('ep-0')).toMatch(W3C_TRACE);
    expect(new RunTraceIds('run-a', { ratio: 1 }).traceparent('ep-0:3')).toBe(a.traceparent('ep-0:3'));
    expect(new RunTraceIds('run-b', { ratio: 1 }).traceId('ep-0')).not.toBe(a.traceId('ep-0'));
    expect(a.traceparent('ep-0:3')).toBe(`00-${a.traceId('ep-0')}-${a.spanId('tool', 'ep-0:3')}-01`);
    expect(new Set(['episode', 'step', 'tool'] as const).size).toBe(new Set([a.spanId('episode', 'ep-0'), a.spanId('step', 'ep-0:1'), a.spanId('tool', 'ep-0:1')]).size);
    const half = new RunTraceIds('run-a', { ratio: 0.5 });
    const sampled = Array.from({ length: 2_000 }, (_, i) => half.sampled(half.traceId(`ep-${i}`))).filter(Boolean).length;
    expect(sampled / 2_000).toBeGreaterThan(0.45);
    expect(sampled / 2_000).toBeLessThan(0.55);
  });
});

describe('otelConfig', () => {
  it('is off without an endpoint, or when the SDK or the traces exporter is disabled', () => {
    expect(otelConfig({})).toBeUndefined();
    expect(otelConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(otelConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
  });

  it('reads the standard variables, and --otel wins over them', () => {
    expect(otelConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toEqual({ endpoint: 'http://c:4318/v1/traces', protocol: 'http/protobuf', sampling: { ratio: 1 }, metrics: { endpoint: 'http://c:4318/v1/metrics', intervalMs: 60_000 } });
    // Traces alone: an endpoint for traces only, or metrics turned off.
    expect(otelConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/custom', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' })).toEqual({ endpoint: 'http://c:4318/custom', protocol: 'http/json', sampling: { ratio: 0.25 } });
    expect(otelConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_METRICS_EXPORTER: 'none' })?.metrics).toBeUndefined();
    expect(otelConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true', OTEL_METRIC_EXPORT_INTERVAL: '5000' }, 'http://d:4318')).toEqual({ endpoint: 'http://d:4318/v1/traces', protocol: 'http/protobuf', sampling: { ratio: 1 }, metrics: { endpoint: 'http://d:4318/v1/metrics', intervalMs: 5_000 } });
    expect(otelConfig({}, 'https://otel.example/otlp/v1/traces')?.metrics).toEqual({ endpoint: 'https://otel.example/otlp/v1/metrics', intervalMs: 60_000 });
  });

  it('refuses what it cannot honour, naming the variable and what to set', () => {
    expect(() => otelConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported/);
    expect(() => otelConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' })).toThrow(/OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1/);
    expect(() => otelConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'jaeger_remote' })).toThrow(/OTEL_TRACES_SAMPLER=jaeger_remote/);
    expect(() => otelConfig({}, 'localhost:4318')).toThrow(/--otel must be an http\(s\) URL/);
    expect(() => otelConfig({ OTEL_METRIC_EXPORT_INTERVAL: '10s' }, 'http://c:4318')).toThrow(/OTEL_METRIC_EXPORT_INTERVAL must be a whole number of milliseconds/);
  });
});
