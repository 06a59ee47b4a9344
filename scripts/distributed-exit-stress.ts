/**
 * Every exit 0 of a distributed coordinator leaves a complete run folder. The run the reliability
 * probe once saw end without trajectories.jsonl, repeated: `agent run --distributed` as a process
 * (40 episodes), two workers, one of them killed with SIGKILL mid-run; after each run whose
 * coordinator exited 0, the folder is checked whole (every file there, every episode finished
 * once, every (episode, step) once, every history replaying to its final state, no keys left).
 *   npx tsx scripts/distributed-exit-stress.ts [--runs 50] [--episodes 40]
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { verify } from './crash-harness.js';
import { dropQueue, startWorker, stopWorkers } from './distributed-harness.js';
import { RUN_FILES } from '../src/replay/run-writer.js';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '50' }, episodes: { type: 'string', default: '40' }, store: { type: 'string', default: process.env['AGENT_STORE'] ?? 'redis://127.0.0.1:6379/0' } } });
const runs = Number(values.runs);
const episodes = Number(values.episodes);
const store = values.store;
let complete = 0;
let failedExits = 0;
const problems: string[] = [];
const started = performance.now();
for (let i = 1; i <= runs; i++) {
  const out = await mkdtemp(path.join(os.tmpdir(), 'agent-exit-stress-'));
  const queue = `agent-exit-stress:${process.pid}:${i}:queue`;
  try {
    const workers = await Promise.all([0, 1].map(() => startWorker({ store, queue, leaseMs: 1500, maxAttempts: 10 })));
    const coordinator = execa('node', ['bin/agent.js', 'run', 'fixtures/distributed', '--distributed', '--store', store, '--queue', queue, '--episodes', String(episodes), '--max-steps', '6', '--tool-option', 'step_ms=20', '--out', out], { reject: false });
    // Kill one worker once it has finished an episode (mid-run, its env loaded, others in hand).
    const victim = workers[i % 2] as (typeof workers)[number];
    while (!/^finished /m.test(victim.output()) && coordinator.exitCode === null) await new Promise((r) => setTimeout(r, 20));
    victim.child.kill('SIGKILL');
    const result = await coordinator;
    await stopWorkers(workers);
    const [runId] = await readdir(out);
    if (result.exitCode !== 0) {
      failedExits++;
      problems.push(`run ${i}: the coordinator exited ${result.exitCode}: ${String(result.stderr).slice(-300)}`);
      continue;
    }
    const dir = path.join(out, runId as string);
    const missing = Object.values(RUN_FILES).filter((f) => !existsSync(path.join(dir, f)));
    const report = await verify(dir, runId as string, store);
    const found = [...missing.map((f) => `${f} missing`), ...report.problems, ...(report.keysLeft !== 0 ? [`${report.keysLeft} keys left`] : [])];
    if (found.length === 0 && report.episodes === episodes) complete++;
    else problems.push(`run ${i} (${runId}): ${found.slice(0, 5).join('; ')}`);
    process.stdout.write(`\r${i}/${runs} runs: ${complete} complete after exit 0, ${failedExits} exits ≠ 0, ${problems.length - failedExits} incomplete`);
  } finally {
    await dropQueue(store, queue);
    await rm(out, { recursive: true, force: true });
  }
}
console.log(`\n${runs} distributed runs of ${episodes} episodes with a worker killed: ${complete} exited 0 with a complete folder, ${failedExits} exited ≠ 0, ${runs - complete - failedExits} incomplete · ${((performance.now() - started) / 1000).toFixed(0)} s`);
for (const p of problems) console.log(p);
if (complete !== runs) process.exitCode = 1;
