/** `agent worker`: take episodes of distributed runs from Redis and run them, until stopped. */
import type { Command } from 'commander';
import type { WorkerEvent } from '../src/internal.js';
import { core } from './lib.js';
import { abortOnSignals } from './interrupt.js';
import { durationOption, integer, positiveInt } from './options.js';
import type { Io } from './io.js';
import { RUN_DEFAULTS, WORKER_DEFAULTS } from '../src/shared/defaults.js';

interface WorkerFlags {
  store: string;
  queue: string;
  concurrency: number;
  envs?: string[];
  lease: number;
  maxAttempts: number;
  storeWait: number;
  healthPort?: number;
  json?: boolean;
}

export function registerWorker(program: Command, io: Io): void {
  program
    .command('worker')
    .description('Take episodes of distributed runs (agent run --distributed) and of rollouts (agent serve --workers) from the Redis queue and run them; SIGTERM hands them back.')
    .option('--store <url>', 'the Redis of the runs: redis://host:port/db (default: $AGENT_STORE)', process.env['AGENT_STORE'])
    .option('--queue <name>', 'the queue to take episodes from (a coordinator\'s --queue)', RUN_DEFAULTS.queue)
    .option('--concurrency <c>', 'episodes in hand at once', positiveInt, WORKER_DEFAULTS.concurrency)
    .option('--envs <dir...>', 'folders holding the envs on this machine (default: the path the coordinator recorded)')
    .addOption(durationOption('--lease <duration>', "how long an episode stays this worker's without renewal: a dead worker's episodes wait this long", WORKER_DEFAULTS.leaseMs))
    .option('--max-attempts <n>', 'claims of one episode without a step committed in between (its workers died running it) before it is given up as worker_lost', positiveInt, WORKER_DEFAULTS.maxAttempts)
    .addOption(durationOption('--store-wait <duration>', 'how long to wait for Redis when it goes away before leaving a run', RUN_DEFAULTS.storeWaitMs))
    .option('--health-port <port>', 'serve GET /ready and /live on this port (0: any free port)', integer)
    .option('--json', 'print worker events as JSON lines')
    .addHelpText('after', '\nExamples:\n  agent worker --store redis://127.0.0.1:6379/0\n  agent worker --store redis://redis:6379/0 --concurrency 16 --envs /envs --health-port 8080')
    .action(async (flags: WorkerFlags) => {
      io.exitCode = await workerCommand(flags, io);
    });
}

async function workerCommand(flags: WorkerFlags, io: Io): Promise<number> {
  if (flags.store === undefined) {
    io.stderr.write('error: a worker needs the Redis of the runs\nhint: pass --store redis://host:port/db (or set AGENT_STORE)\n');
    return 2;
  }
  const { RolloutWorker, RunMetrics, serveWorkerHealth } = await core();
  const controller = new AbortController();
  const stopListening = abortOnSignals(controller, io, 'stopping: handing episodes in hand back (send the signal again to exit at once)');
  try {
    await using worker = await RolloutWorker.start({ store: flags.store, queue: flags.queue, concurrency: flags.concurrency, leaseMs: flags.lease, maxAttempts: flags.maxAttempts, storeWaitMs: flags.storeWait, signal: controller.signal, ...(flags.envs ? { envs: flags.envs } : {}) });
    // The health port also serves the worker's metrics: its episodes and the steps it ran, by run.
    using metrics = flags.healthPort === undefined ? undefined : await RunMetrics.create();
    if (metrics) {
      metrics.observeWorker(worker.events);
      metrics.observeRuns((listener) => worker.onRunEvent(listener));
      metrics.gauge('agent_worker_running', 'Episodes this worker runs now.', () => worker.running);
      metrics.gauge('agent_worker_ready', '1 while the worker takes episodes, 0 while it drains or its Redis is away.', () => Number(worker.ready));
    }
    const health = flags.healthPort === undefined ? undefined : await serveWorkerHealth(flags.healthPort, () => ({ ready: worker.ready, running: worker.running }), metrics ? { metrics: () => metrics.render() } : {});
    const print = (e: WorkerEvent): void => void (flags.json ? io.stdout : e.type === 'problem' ? io.stderr : io.stdout).write(`${flags.json ? JSON.stringify(e) : describe(e)}\n`);
    worker.events.onAny(print);
    io.stdout.write(flags.json ? `${JSON.stringify({ type: 'worker_started', id: worker.id, queue: flags.queue, concurrency: flags.concurrency, ...(health ? { health_port: health.port } : {}) })}\n` : `worker ${worker.id}: taking episodes from ${flags.queue} (concurrency ${flags.concurrency}, lease ${flags.lease} ms${health ? `, health on :${health.port}` : ''})\n`);
    try {
      const s = await worker.work(controller.signal);
      io.stdout.write(flags.json ? `${JSON.stringify({ type: 'worker_stopped', ...s })}\n` : `worker ${s.id} stopped: ${s.finished} finished, ${s.handedBack} handed back, ${s.leasesLost} leases lost, ${s.givenUp} given up, ${s.fencedWrites} fenced writes\n`);
    } finally {
      await health?.close();
    }
  } finally {
    stopListening();
  }
  return 0;
}

function describe(e: WorkerEvent): string {
  switch (e.type) {
    case 'claimed':
      return `took ${e.runId} episode ${e.episode}${e.attempts > 1 ? ` (attempt ${e.attempts}${e.previousOwner ? `, from ${e.previousOwner}` : ''})` : ''}`;
    case 'episode_done':
      return `finished ${e.runId} episode ${e.episode}: ${e.steps} steps (${e.reason})`;
    case 'handed_back':
      return `handed back ${e.runId} episode ${e.episode}`;
    case 'lease_lost':
      return `lost the lease on ${e.runId} episode ${e.episode}: another worker continues it`;
    case 'given_up':
      return `gave up ${e.runId} episode ${e.episode} after ${e.attempts} lost workers: ${e.cause}`;
    case 'problem':
      return `warning: ${e.message}`;
  }
}
