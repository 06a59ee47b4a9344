/** One cold measurement (bench/cold-start.bench.ts): argv N M; prints {ratio, stepsPerSecond, cpuUsPerStep}. */
import type { AgentInstance } from '../../src/index.js';
import { bump, makeEnv } from './bench-env.js';

const [n, m] = process.argv.slice(2).map(Number) as [number, number];
const LATENCY_MS = 20;
// The env's default store options, as a user gets them.
await using env = await makeEnv({
  slow: async (params, ctx) => {
    await new Promise((r) => setTimeout(r, LATENCY_MS));
    return bump(params, ctx.state);
  },
});
const agents = Array.from({ length: n }, (_, i) => env.createInstance({ id: `a${i}` }));
await Promise.all(agents.map((a) => a.reset({ counter: 0, last: null, user: { id: 'u' } })));
async function run(agent: AgentInstance): Promise<void> {
  for (let i = 0; i < m; i++) {
    const r = await agent.step({ name: 'slow', params: { tag: 't', n: i } });
    if (r.info.status !== 'resolved') throw new Error(`step failed: ${JSON.stringify(r.info.error)}`);
  }
}
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await Promise.all(agents.map(run));
const seconds = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
const stepsPerSecond = (n * m) / seconds;
console.log(JSON.stringify({ ratio: stepsPerSecond / (n / (LATENCY_MS / 1000)), stepsPerSecond, cpuUsPerStep: (cpu.user + cpu.system) / (n * m) }));
