/**
 * The full fault drill of distributed runs (the CI test runs a reduced one): a run of 4 workers on
 * the shared Redis, 25 workers killed with SIGKILL mid-episode and replaced, then the folder checked.
 *   npx tsx scripts/distributed-crash-test.ts [--kills 25] [--episodes 120]
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { verify } from './crash-harness.js';
import { coordinate, dropQueue, killWorkers } from './distributed-harness.js';

const { values } = parseArgs({ options: { kills: { type: 'string', default: '25' }, episodes: { type: 'string', default: '120' }, store: { type: 'string', default: process.env['AGENT_STORE'] ?? 'redis://127.0.0.1:6379/0' } } });
const kills = Number(values.kills);
const episodes = Number(values.episodes);
const store = values.store;
const out = await mkdtemp(path.join(os.tmpdir(), 'agent-distributed-crash-'));
const queue = `agent-crash-test:${process.pid}:queue`;
const started = performance.now();
try {
  const { run, done } = await coordinate({ env: 'fixtures/distributed', store, queue, out, episodes, maxSteps: 8, toolOptions: { step_ms: 100 } });
  // In a storm of kills an innocent episode can lose several workers in a row before its next step: give up only far later.
  const drill = await killWorkers({ store, queue, leaseMs: 1500, maxAttempts: 10 }, 4, kills, [300, 700], done, 7, (line) => console.log(line));
  const summary = await done;
  const report = await verify(path.join(out, run.runId), run.runId, store);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(`${drill.kills} kills · ${report.episodes}/${episodes} episodes · ${report.steps} steps · ${report.lostCalls} TOOL_LOST · workers seen ${summary.distributed?.workers.length ?? 0} · fenced writes ${summary.distributed?.fenced_writes ?? 0} · keys left ${report.keysLeft} · ${seconds} s`);
  if (report.problems.length > 0 || drill.kills < kills || report.keysLeft !== 0) {
    console.log(`problems:\n${report.problems.slice(0, 20).join('\n')}`);
    const events = (await readFile(path.join(out, run.runId, 'events.jsonl'), 'utf8')).split('\n').filter(Boolean);
    for (const line of events) if (line.includes('"worker_lost"')) console.log(line);
    process.exitCode = 1;
  } else console.log('0 problems: every episode finished once, every (episode, step) once, every history replays to its final state');
} finally {
  await dropQueue(store, queue);
  await rm(out, { recursive: true, force: true });
}
