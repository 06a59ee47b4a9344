/**
 * Per-call overhead of an MCP tool (stdio, the official SDK on both sides) against the same tool
 * as a persistent subprocess (one JSON line each way), both in Node and doing the same addition:
 * sequential latency (p50, p99 over 2,000 calls) and throughput with 16 calls in flight.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AgentEnv, defineEnv, type AgentInstance } from '../src/index.js';

const dir = await mkdtemp(path.join(os.tmpdir(), 'mcp-bench-'));
// The persistent subprocess: reads JSON lines, answers {observation}.
await writeFile(
  path.join(dir, 'add.mjs'),
  `import { createInterface } from 'node:readline';
for await (const line of createInterface({ input: process.stdin })) {
  const { params } = JSON.parse(line);
  process.stdout.write(JSON.stringify({ observation: { sum: params.a + params.b } }) + '\\n');
}
`,
);
const params = { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] };

async function measure(label: string, e: AgentEnv, tool: string): Promise<void> {
  const agent = e.createInstance();
  await agent.reset({});
  const call = async (inst: AgentInstance, i: number): Promise<void> => {
    const r = await inst.resolve(inst.dispatch({ name: tool, params: { a: i, b: 1 } }));
    if (r.info.status !== 'resolved') throw new Error(`${label}: ${JSON.stringify(r.info.error)}`);
  };
  for (let i = 0; i < 200; i++) await call(agent, i); // warm-up: the server or process is up
  const times: number[] = [];
  for (let i = 0; i < 2_000; i++) {
    const t0 = performance.now();
    await call(agent, i);
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const agents = await Promise.all(Array.from({ length: 16 }, async () => {
    const a = e.createInstance();
    await a.reset({});
    return a;
  }));
  const t0 = performance.now();
  await Promise.all(agents.map(async (a) => {
    for (let i = 0; i < 250; i++) await call(a, i);
  }));
  const rate = 4_000 / ((performance.now() - t0) / 1000);
  console.log(`${label.padEnd(28)} p50 ${(times[1_000] as number).toFixed(3)} ms, p99 ${(times[1_980] as number).toFixed(3)} ms per call; ${Math.round(rate).toLocaleString('en-US')} calls/s with 16 in flight`);
}

try {
  const base = { state: { type: 'object' }, initial_states: [{}] };
  await using mcp = await AgentEnv.create(await defineEnv({ ...base, mcp_servers: { t: { command: ['node', path.resolve('fixtures/mcp-test-server/server.mjs')] } }, actions_from: [{ server: 't', include: ['add'] }] }, { dir }));
  await using sub = await AgentEnv.create(await defineEnv({ ...base, actions: [{ name: 'add', parameters: params }], tools: { add: { command: ['node', 'add.mjs'], persistent: true, concurrency: 1 } } }, { dir }));
  await measure('persistent subprocess (1)', sub, 'add');
  await measure('MCP stdio (one server)', mcp, 'add');
} finally {
  await rm(dir, { recursive: true, force: true });
}
