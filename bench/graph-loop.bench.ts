/**
 * A LangGraph-shaped loop on the env core: 50 agents × 200 steps, each step one node of a graph
 * updating nested state (the current node, a visit counter, a scratch record) and appending to the
 * history, persisted with time travel (the memory store keeps every delta; `stateAt` answers any
 * seq, checked at the end). A fresh process per run, timed from the first step, on the built
 * package. Target: ≤ 20 µs per step (issue #25 measured LangGraph.js's MemorySaver on the same work at 856 µs).
 *
 * `--json` prints the figure as one JSON object.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type * as Lib from '../src/index.js';
import { target } from './lib/targets.js';

const AGENTS = 50;
const STEPS = 200;
const GOAL_US = 20;

interface Probe {
  readonly usPerStep: number;
  readonly cpuUsPerStep: number;
}

async function probe(): Promise<Probe> {
  const { AgentEnv, defineEnv } = (await import('../dist/src/index.js' as string)) as Pick<typeof Lib, 'AgentEnv' | 'defineEnv'>;
  const NODES = ['plan', 'act', 'observe', 'reflect'] as const;
  const def = await defineEnv({
    name: 'graph',
    state: {
      type: 'object',
      required: ['graph', 'history'],
      properties: {
        graph: {
          type: 'object',
          required: ['node', 'visits'],
          properties: {
            node: { enum: [...NODES] },
            visits: { type: 'object', additionalProperties: { type: 'integer', minimum: 0 } },
            scratch: { type: 'object', properties: { note: { type: 'string' }, step: { type: 'integer' } } },
          },
        },
        history: { type: 'array', items: { type: 'object', required: ['node', 'step'], properties: { node: { type: 'string' }, step: { type: 'integer' } } } },
      },
    },
    actions: [{ name: 'advance', parameters: { type: 'object', properties: { note: { type: 'string' } } } }],
  });
  type GraphState = { graph: { node: (typeof NODES)[number]; visits: Record<string, number> }; history: unknown[] };
  await using env = await AgentEnv.create(def, {
    handlers: {
      advance: (params, ctx) => {
        const s = ctx.state as GraphState;
        const node = NODES[(NODES.indexOf(s.graph.node) + 1) % NODES.length] as string;
        const step = s.history.length + 1;
        const patch: Lib.ToolResult['patch'] = [
          { op: 'replace', path: '/graph/node', value: node },
          { op: 'replace', path: `/graph/visits/${node}`, value: (s.graph.visits[node] ?? 0) + 1 },
          { op: 'replace', path: '/graph/scratch', value: { note: params['note'] as string, step } },
          { op: 'add', path: '/history/-', value: { node, step } },
        ];
        return { observation: null, patch };
      },
    },
  });
  const agents = Array.from({ length: AGENTS }, (_, i) => env.createInstance({ id: `g${i}` }));
  await Promise.all(agents.map((a) => a.reset({ graph: { node: 'plan', visits: { plan: 0, act: 0, observe: 0, reflect: 0 }, scratch: { note: '', step: 0 } }, history: [] })));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    agents.map(async (a) => {
      for (let i = 0; i < STEPS; i++) {
        const r = await a.step({ name: 'advance', params: { note: `n${i}` } });
        if (r.info.status !== 'resolved') throw new Error(`step failed: ${JSON.stringify(r.info.error)}`);
      }
    }),
  );
  const us = (performance.now() - t0) * 1000;
  const cpu = process.cpuUsage(cpu0);
  // Time travel over what was persisted: the state at seq 100 is the one after the 100th step.
  const past = (await agents[7]?.stateAt({ seq: 100 }))?.state as GraphState | undefined;
  if (past?.history.length !== 100) throw new Error(`stateAt({seq: 100}) has ${past?.history.length} history entries, expected 100`);
  return { usPerStep: us / (AGENTS * STEPS), cpuUsPerStep: (cpu.user + cpu.system) / (AGENTS * STEPS) };
}

if (process.argv.includes('--probe')) {
  console.log(JSON.stringify(await probe()));
} else {
  if (!existsSync(path.join(import.meta.dirname, '..', 'dist', 'src', 'index.js'))) throw new Error('dist/ is missing: run `npm run build` first');
  const runs = [0, 1, 2]
    .map(() => JSON.parse(execFileSync(process.execPath, ['--import', 'tsx', import.meta.filename, '--probe'], { encoding: 'utf8' })) as Probe)
    .sort((a, b) => a.usPerStep - b.usPerStep);
  const mid = runs[1] as Probe;
  if (process.argv.includes('--json')) console.log(JSON.stringify({ graphLoop: mid }));
  else {
    console.log(`LangGraph-shaped loop (${AGENTS} agents × ${STEPS} steps: nested update + history append, time travel kept), fresh process, first step on:`);
    console.log(`  ${mid.usPerStep.toFixed(1)} µs/step (${runs.map((r) => r.usPerStep.toFixed(1)).join(', ')}), ${mid.cpuUsPerStep.toFixed(1)} µs CPU/step   ${target('LangGraph-shaped loop, per step', mid.usPerStep, 'µs', { atMost: GOAL_US })}`);
  }
}
