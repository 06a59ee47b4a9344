/**
 * GET /metrics on `agent run --port`: Prometheus text, open like /health (a scraper has no token)
 * and behind the same Host/Origin checks, counting what the run's events say: steps, tool calls and
 * their latency, delayed rewards pending then landed, episodes. (Prometheus's own Python client
 * parses the same page from `agent serve` in clients/python/tests/test_metrics.py.)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { randomPolicy, Run, type Policy } from '../index.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

interface Page {
  /** `# TYPE` of each family. */
  readonly types: ReadonlyMap<string, string>;
  readonly samples: readonly { readonly name: string; readonly labels: Readonly<Record<string, string>>; readonly value: number }[];
}

/** The text exposition format, strictly: every line a comment or `name{labels} value`, or this throws naming it. */
function parsePage(text: string): Page {
  const types = new Map<string, string>();
  const samples: Page['samples'][number][] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) types.set(type[1] as string, type[2] as string);
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || Number.isNaN(Number(m[3]))) throw new Error(`not a sample line: ${line}`);
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1] as string, l[2] as string]));
    samples.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return { types, samples };
}

/** The value of the first sample of `name` whose labels include `labels`. */
function value(page: Page, name: string, labels: Record<string, string> = {}): number | undefined {
  return page.samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}

describe('GET /metrics', () => {
  it('counts the run as its events go, in Prometheus text; open to a scraper, closed to a web page', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    let calls = 0;
    // The second episode waits before its first step: the first has ended, its judge's values still on their way.
    const policy: Policy = async (obs, ctx) => {
      if (obs.step === 0 && ++calls === 2) await held;
      return randomPolicy(obs, ctx);
    };
    const out = await mkdtemp(path.join(os.tmpdir(), 'metrics-'));
    dirs.push(out);
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: 2, concurrency: 1, maxSteps: 3, seed: 3, out, port: 0, policy, toolOptions: { latency_scale: 0.01 } });
    const firstEnded = new Promise<void>((r) => run.events.on('episode_finished', () => r()));
    const done = run.execute();
    try {
    await firstEnded;
    const url = `http://127.0.0.1:${run.port}/metrics`;
    const res = await fetch(url);
    expect([res.status, res.headers.get('content-type')]).toEqual([200, expect.stringMatching(/^text\/plain; version=0\.0\.4/)]);
    const during = parsePage(await res.text());
    const runId = run.runId;
    expect(value(during, 'agent_steps_total', { run_id: runId, status: 'resolved' })).toBe(3);
    expect(value(during, 'agent_tool_calls_total', { run_id: runId, tool: 'get_weather', outcome: 'ok' })).toBe(3);
    expect(value(during, 'agent_tool_call_duration_seconds_count', { run_id: runId, tool: 'get_weather' })).toBe(3);
    expect(value(during, 'agent_episodes_total', { run_id: runId, reason: 'max_steps' })).toBe(1);
    expect(value(during, 'agent_traces_in_flight', { run_id: runId })).toBe(0);
    // Each step's judge value is either still awaited or has landed: nothing lost, nothing twice.
    const pending = value(during, 'agent_rewards_pending', { run_id: runId, source: 'llm_score' }) ?? 0;
    const landed = value(during, 'agent_rewards_total', { run_id: runId, source: 'llm_score', status: 'arrived' }) ?? 0;
    expect(pending + landed).toBe(3);
    expect(during.types.get('agent_reward_delay_seconds')).toBe('histogram');
    expect(value(during, 'agent_store_available', { run_id: runId })).toBe(1);
    expect([...during.types.keys()]).toEqual(expect.arrayContaining(['agent_event_loop_delay_seconds', 'process_resident_memory_bytes', 'process_cpu_seconds_total']));
    // A web page the user has open cannot read it.
    expect((await fetch(url, { headers: { origin: 'https://evil.example' } })).status).toBe(403);
    } finally {
      release();
      await done;
    }
  });
});
