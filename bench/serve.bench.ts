/**
 * What `agent serve` adds to a step, measured from Python (the trainer's side): an asyncio client
 * (agentic_rl, websockets) holds S sessions, each stepping a tool that takes 20 ms, for a fixed
 * time. Ideal throughput is S / 20 ms (12,800 steps/s at 256 sessions); reported: steps/s, its
 * ratio to the ideal, and the latency a step adds over its 20 ms (p50, p99). Then 1,000 sessions
 * open at once, each resetting and stepping. Client and server share this machine's cores. Then a
 * tool that answers at once (0 ms), 64 sessions: the server's CPU per step (this process is the
 * server; the client is another), the figure the serve path's work is judged by.
 *
 * Needs the Python venv `npm run test:python` makes (.venv/).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { serveEnv } from '../src/internal.js';
import { writeSleepyEnv } from './lib/sleepy-env.js';

const python = path.resolve('.venv/bin/python');
if (!existsSync(python)) {
  // Skipped, not failed: `npm run bench` goes on to the benchmarks after this one (as without Chromium).
  console.log('serve bench skipped: no Python venv at .venv/: run `npm run test:python` once to make it.');
  process.exit(0);
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'serve-bench-'));
await writeSleepyEnv(dir);

const client = `
import asyncio, json, sys, time
from agentic_rl import Env

async def steady(url, sessions, seconds, action, params):
    lat = []
    stop = time.monotonic() + seconds
    async def one(i):
        async with Env(url) as env:
            await env.reset()
            while time.monotonic() < stop:
                t0 = time.monotonic()
                r = await env.step(action, params)
                lat.append(time.monotonic() - t0)
                if r.done:
                    await env.reset()
    t0 = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(sessions)))
    return len(lat) / (time.monotonic() - t0), sorted(lat)

async def burst(url, sessions):
    async def one(i):
        async with Env(url) as env:
            await env.reset()
            return (await env.step("wait", {})).status
    return await asyncio.gather(*(one(i) for i in range(sessions)))

url, sessions, seconds, many, action, params = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], json.loads(sys.argv[6])
rate, lat = asyncio.run(steady(url, sessions, seconds, action, params))
statuses = asyncio.run(burst(url, many)) if many > 0 else []
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(json.dumps({"rate": rate, "p50": q(0.5), "p99": q(0.99), "steps": len(lat), "burst_ok": statuses.count("resolved"), "burst": many}))
`;

const controller = new AbortController();
let ready!: (url: string) => void;
const listening = new Promise<string>((r) => (ready = r));
const served = serveEnv({ env: dir, listen: 0, out: path.join(dir, 'runs'), maxSteps: 100_000, maxSessions: 2_048, onListening: ({ url }) => ready(url) }, controller.signal);
const url = await listening;

interface Measured {
  readonly rate: number;
  readonly p50: number;
  readonly p99: number;
  readonly steps: number;
  readonly burst_ok: number;
  readonly burst: number;
  /** This process's CPU (the server's) over the whole measure, per step. */
  readonly cpuPerStepUs: number;
}

async function measure(sessions: number, seconds: number, many: number, action = 'wait', at = url, params: object = {}): Promise<Measured> {
  const cpu = process.cpuUsage();
  const child = spawn(python, ['-c', client, at, String(sessions), String(seconds), String(many), action, JSON.stringify(params)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((r) => child.on('close', r));
  if (code !== 0) throw new Error(`the Python client exited ${code}`);
  const used = process.cpuUsage(cpu);
  const r = JSON.parse(out) as Omit<Measured, 'cpuPerStepUs'>;
  // Each session's reset and close are in the measure too: a few per thousand steps.
  return { ...r, cpuPerStepUs: (used.user + used.system) / Math.max(1, r.steps + r.burst) };
}

console.log('agent serve, Python asyncio client (agentic_rl), a 20 ms tool, client and server on this machine:');
for (const sessions of [64, 256]) {
  const r = await measure(sessions, 10, sessions === 256 ? 1_000 : 0);
  const ideal = sessions / 0.02;
  console.log(
    `  ${sessions} sessions: ${Math.round(r.rate).toLocaleString('en-US')} steps/s of an ideal ${ideal.toLocaleString('en-US')} (${(r.rate / ideal).toFixed(2)}); added latency p50 ${((r.p50 - 0.02) * 1000).toFixed(1)} ms, p99 ${((r.p99 - 0.02) * 1000).toFixed(1)} ms (${r.steps.toLocaleString('en-US')} steps)`,
  );
  if (r.burst > 0) console.log(`  ${r.burst.toLocaleString('en-US')} sessions at once, each reset + step: ${r.burst_ok.toLocaleString('en-US')} resolved`);
}
const instant = await measure(64, 10, 0, 'now');
console.log(`  a 0 ms tool, 64 sessions: ${Math.round(instant.rate).toLocaleString('en-US')} steps/s; server CPU ${instant.cpuPerStepUs.toFixed(1)} µs per step (${instant.steps.toLocaleString('en-US')} steps)`);
// τ-bench airline: its 15 tools (9 KB of JSON) go with the reset's reply (the client asks for them on change only), the step a 0 ms `calculate`.
{
  const airline = new AbortController();
  let airlineUrl!: (url: string) => void;
  const airlineListening = new Promise<string>((r) => (airlineUrl = r));
  const airlineServed = serveEnv({ env: 'fixtures/tau-bench/airline', listen: 0, out: path.join(dir, 'runs'), maxSteps: 100_000, onListening: ({ url }) => airlineUrl(url) }, airline.signal);
  const r = await measure(64, 10, 0, 'calculate', await airlineListening, { expression: '1 + 2' });
  console.log(`  τ-bench airline (its 15 tools listed at reset, then only when they change), a 0 ms tool, 64 sessions: ${Math.round(r.rate).toLocaleString('en-US')} steps/s; server CPU ${r.cpuPerStepUs.toFixed(1)} µs per step`);
  airline.abort();
  await airlineServed;
}
// The same load from a Node client (ws), which costs less per message than Python's asyncio: what
// the server itself sustains when the client is not the bottleneck.
async function nodeClient(sessions: number, seconds: number): Promise<{ rate: number; p50: number; p99: number }> {
  const lat: number[] = [];
  const stop = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: sessions }, async () => {
      const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`);
      await new Promise((r) => ws.once('open', r));
      const ask = (m: object): Promise<{ type: string; data: { done?: boolean } }> =>
        new Promise((resolve) => {
          ws.once('message', (raw) => resolve(JSON.parse(String(raw)) as { type: string; data: { done?: boolean } }));
          ws.send(JSON.stringify(m));
        });
      await ask({ type: 'reset' });
      while (performance.now() < stop) {
        const s = performance.now();
        const r = await ask({ type: 'step', data: { name: 'wait', params: {} } });
        lat.push(performance.now() - s);
        if (r.data.done) await ask({ type: 'reset' });
      }
      ws.close();
    }),
  );
  lat.sort((a, b) => a - b);
  return { rate: lat.length / ((performance.now() - t0) / 1000), p50: (lat[Math.floor(lat.length / 2)] ?? 0) / 1000, p99: (lat[Math.floor(lat.length * 0.99)] ?? 0) / 1000 };
}
const n = await nodeClient(256, 10);
console.log(`  256 sessions from a Node client (the server's own ceiling): ${Math.round(n.rate).toLocaleString('en-US')} steps/s (${(n.rate / 12_800).toFixed(2)}); added latency p50 ${((n.p50 - 0.02) * 1000).toFixed(1)} ms, p99 ${((n.p99 - 0.02) * 1000).toFixed(1)} ms`);
controller.abort();
await served;
await rm(dir, { recursive: true, force: true });
