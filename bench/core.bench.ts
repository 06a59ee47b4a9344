/**
 * `npm run bench`: the core's own cost, measured in one process.
 *
 * 1. Overhead per step with a no-op tool, validation and state deltas on (params validated,
 *    a JSON Patch applied, the new state validated and appended to the store, events emitted).
 *    Target: ≤ 20 µs per step (≥ 50k steps/s).
 * 2. Throughput with a tool that sleeps 20 ms, at concurrency 16, 64, 256 and 1024, against the
 *    ideal C / L; plus the sequential baseline. Targets: ≥ 90% of ideal up to 256, ≥ 80% at 1024.
 *
 * `--json` prints the figures as one JSON object (for CI regression checks).
 */
import { sleep, type AgentInstance, type ToolHandler } from '../src/index.js';
import { bump, makeEnv } from './lib/bench-env.js';

const json = process.argv.includes('--json');
const log = (line: string): void => {
  if (!json) console.log(line);
};

const noop: ToolHandler = (params, ctx) => bump(params, ctx.state);

async function steps(agent: AgentInstance, count: number, name: string): Promise<void> {
  for (let i = 0; i < count; i++) {
    const r = await agent.step({ name, params: { tag: 't', n: i } });
    if (r.info.status !== 'resolved') throw new Error(`step failed: ${JSON.stringify(r.info.error)}`);
  }
}

async function overhead(): Promise<{ usPerStep: number; stepsPerSecond: number; concurrentStepsPerSecond: number; observedUsPerStep: number }> {
  await using env = await makeEnv({ noop }, { snapshotEvery: 100, retainDeltas: 1_000 });
  const agent = env.createInstance();
  await agent.reset({ counter: 0, last: null, user: { id: 'u1' } });
  await steps(agent, 20_000, 'noop'); // warm-up: JIT, ajv compile
  const n = 200_000;
  const t0 = performance.now();
  await steps(agent, n, 'noop');
  const ms = performance.now() - t0;
  // Many instances at once, as a trainer would drive them.
  const agents = Array.from({ length: 64 }, (_, i) => env.createInstance({ id: `c${i}` }));
  await Promise.all(agents.map((a) => a.reset({ counter: 0, last: null, user: { id: 'u1' } })));
  const per = 3_000;
  const t1 = performance.now();
  await Promise.all(agents.map((a) => steps(a, per, 'noop')));
  const ms2 = performance.now() - t1;
  // With a subscriber, as under `agent run`: every event is built and delivered.
  let events = 0;
  const off = env.events.onAny(() => void events++);
  const t2 = performance.now();
  await steps(agent, n / 4, 'noop');
  const ms3 = performance.now() - t2;
  off();
  if (events === 0) throw new Error('no events observed');
  return { usPerStep: (ms * 1000) / n, stepsPerSecond: n / (ms / 1000), concurrentStepsPerSecond: (agents.length * per) / (ms2 / 1000), observedUsPerStep: (ms3 * 1000) / (n / 4) };
}

const LATENCY_MS = 20;

/**
 * Two 20 ms tools: one honours its AbortSignal (reads ctx.signal, so the core must create one:
 * Node 20 spends ~4 µs building an AbortSignal), one does not (the core then creates none).
 */
const SLOW_TOOLS: Record<'signal' | 'plain', ToolHandler> = {
  signal: async (_p, ctx) => (await sleep(LATENCY_MS, ctx.signal), { observation: null }),
  plain: async () => (await new Promise((r) => setTimeout(r, LATENCY_MS)), { observation: null }),
};

async function throughput(concurrency: number, rounds: number, tool: keyof typeof SLOW_TOOLS): Promise<{ concurrency: number; tool: string; stepsPerSecond: number; ideal: number; ratio: number; cpuUsPerStep: number }> {
  await using env = await makeEnv({ slow: SLOW_TOOLS[tool] }, { snapshotEvery: 100, retainDeltas: 1_000 });
  const agents = Array.from({ length: concurrency }, (_, i) => env.createInstance({ id: `a${i}` }));
  await Promise.all(agents.map((a) => a.reset({ counter: 0, last: null, user: { id: 'u' } })));
  await Promise.all(agents.map((a) => steps(a, 2, 'slow'))); // warm-up
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(agents.map((a) => steps(a, rounds, 'slow')));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const stepsPerSecond = (concurrency * rounds) / seconds;
  const ideal = concurrency / (LATENCY_MS / 1000);
  // CPU time (user + system, all threads: GC included) per step: the budget at C=1024 is 1/51,200 s ≈ 19.5 µs.
  return { concurrency, tool, stepsPerSecond, ideal, ratio: stepsPerSecond / ideal, cpuUsPerStep: (cpu.user + cpu.system) / (concurrency * rounds) };
}

const o = await overhead();
log('Core overhead per step, no-op tool (params and state validated, enabled_if evaluated, JSON Patch applied, delta stored)');
log(`  sequential, one instance:  ${o.usPerStep.toFixed(2)} µs/step  = ${Math.round(o.stepsPerSecond).toLocaleString('en-US')} steps/s   (target ≤ 20 µs)`);
log(`  64 instances at once:      ${Math.round(o.concurrentStepsPerSecond).toLocaleString('en-US')} steps/s`);
log(`  with an event subscriber:  ${o.observedUsPerStep.toFixed(2)} µs/step (8 events per step built and delivered)`);

const rows = [];
for (const tool of ['signal', 'plain'] as const) {
  log(`\nThroughput with a ${LATENCY_MS} ms tool that ${tool === 'signal' ? 'honours its AbortSignal' : 'ignores its AbortSignal'}, against the ideal C / L`);
  for (const c of [1, 16, 64, 256, 1024]) {
    const r = await throughput(c, c === 1 ? 50 : 25, tool);
    rows.push(r);
    const target = c === 1 ? '(sequential baseline)' : c <= 256 ? '(target ≥ 90%)' : '(target ≥ 80%)';
    log(`  C=${String(c).padEnd(5)} ${Math.round(r.stepsPerSecond).toLocaleString('en-US').padStart(7)} steps/s  ideal ${Math.round(r.ideal).toLocaleString('en-US').padStart(6)}  ${(r.ratio * 100).toFixed(1).padStart(5)}%  ${r.cpuUsPerStep.toFixed(1).padStart(5)} µs CPU/step ${target}`);
  }
}
if (json) console.log(JSON.stringify({ overhead: o, latencyMs: LATENCY_MS, throughput: rows }));
