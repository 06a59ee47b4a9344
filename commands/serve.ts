/**
 * `agent serve <env-dir|suite>`: the env as a service that Python trainers drive live, over
 * OpenEnv's protocol (WebSocket /ws and HTTP). Every session is a recorded episode of a run.
 */
import { setFlagsFromString } from 'node:v8';
import type { Command } from 'commander';
import type { JsonValue } from '../src/internal.js';
import { abortOnSignals } from './interrupt.js';
import type { Io } from './io.js';
import { core } from './lib.js';
import { durationOption, integer, OTEL_HELP, positiveInt, rewardSource, toolOption } from './options.js';
import { RUN_DEFAULTS, SERVE_DEFAULTS } from '../src/shared/defaults.js';

interface Flags {
  port: number;
  host: string;
  token?: string;
  maxSessions: number;
  allowAgentPrograms?: boolean;
  llmBaseUrl: string[];
  maxSteps: number;
  httpIdle: number;
  wsTimeout: number;
  split: string;
  seed: number;
  out: string;
  store: string;
  runPort?: number;
  json?: boolean;
  toolOption: Record<string, JsonValue>;
  rewardSource: Record<string, JsonValue>;
  otel?: string;
  resume?: string;
  workers?: string;
  queue: string;
}

/** How much V8 may grow `agent serve`'s heap past what a full collection left live (its default is up to ~4×). */
const SERVE_HEAP_GROWING_PERCENT = 30;

export function registerServe(program: Command, io: Io): void {
  program
    .command('serve')
    .description("Serve an env (or a benchmark suite) for trainers to drive live, over OpenEnv's protocol: WebSocket /ws and HTTP; every session a recorded episode.")
    .argument('[env]', 'environment folder, a suite folder, or a suite shipped with the toolkit (tau-bench/airline, tau-bench/retail); not with --resume')
    .option('--port <port>', 'port to listen on (0: any free one)', integer, SERVE_DEFAULTS.port)
    .option('--host <address>', 'address to serve on (another than 127.0.0.1, e.g. 0.0.0.0, only with --token)', RUN_DEFAULTS.host)
    .option('--token <secret>', 'bearer token clients must send (default: $AGENT_TOKEN; none on loopback, where OpenEnv clients send none)', process.env['AGENT_TOKEN'])
    .option('--max-sessions <n>', 'sessions at once (WebSocket and HTTP together)', positiveInt, SERVE_DEFAULTS.maxSessions)
    .option('--llm-base-url <url>', "an inference server (vLLM-compatible, …/v1) rollouts requests may use: a request names one as base_url, or gets the first; no other is ever called (repeatable)", (v: string, prev: string[]) => [...prev, v], [])
    .option('--workers <url>', "run the rollouts' llm: episodes on agent workers taking episodes from this Redis (redis://host:port/db), not in this process; groups are still assembled and sent here")
    .option('--queue <name>', 'the queue those workers take episodes from (their --queue)', RUN_DEFAULTS.queue)
    .option('--allow-agent-programs', 'let a rollouts request name an agent program ("agent": {"command": [...]}) to run each episode; it runs as this server\'s user')
    .option('--max-steps <m>', 'steps per episode at most (the step that reaches it comes back done, truncated)', positiveInt, SERVE_DEFAULTS.maxSteps)
    .addOption(durationOption('--http-idle <duration>', 'an HTTP session with no request for this long ends', SERVE_DEFAULTS.httpIdleMs))
    .addOption(durationOption('--ws-timeout <duration>', 'a WebSocket client that answers nothing (no message, no pong to the pings) for this long is cut off, its episode ended client_lost and its slot freed', SERVE_DEFAULTS.wsTimeoutMs))
    .option('--split <name>', "a suite's task split that reset {task_id} and rollouts draw from; several as train,test", SERVE_DEFAULTS.split)
    .option('--seed <s>', 'seed for the tools and simulated latency', integer, RUN_DEFAULTS.seed)
    .option('--out <dir>', 'parent folder of run folders', RUN_DEFAULTS.out)
    .option('--store <url>', "where episode states live: 'memory', or redis://host:port/db (default: $AGENT_STORE, else memory)", process.env['AGENT_STORE'] ?? 'memory')
    .option('--resume <run-id>', 'serve a run again after its process stopped (killed, crashed), from its journal in the Redis --store: every step its clients were answered is kept, episodes open then end client_lost, new sessions continue the run')
    .option('--run-port <port>', "also serve the run's POST /rewards and GET /events on 127.0.0.1:<port> (agent debug --attach follows it)", integer)
    .option('--otel <url>', OTEL_HELP)
    .option('--json', 'print the address and then the run summary as JSON on stdout')
    .option('--tool-option <key=value>', 'option passed to the tools module (repeatable)', toolOption, {})
    .option('--reward-source <name=binding>', 'rebind a reward source (repeatable), as for agent run', rewardSource, {})
    .addHelpText(
      'after',
      '\nExamples:\n  agent serve fixtures/weather\n  agent serve tau-bench/airline --port 8000 --max-sessions 256\n  agent serve fixtures/weather --store redis://127.0.0.1:6379/0\n  agent serve --resume 20261130-101500-3fa2c1 --store redis://127.0.0.1:6379/0\n  agent serve fixtures/lookup --llm-base-url http://vllm:8000/v1 --workers redis://redis:6379/0   (then: agent worker --store redis://redis:6379/0)\n\nFrom Python (pip install ./clients/python):\n  from agentic_rl import SyncEnv\n  with SyncEnv("http://127.0.0.1:8000") as env:\n      r = env.reset(); r = env.step({"name": "get_weather", "params": {"city": "Paris"}})\n\nOpenEnv\'s own client works too: GenericEnvClient(base_url="http://127.0.0.1:8000").',
    )
    .action(async (envSpec: string | undefined, flags: Flags) => {
      if ((envSpec === undefined) === (flags.resume === undefined)) {
        io.stderr.write(`error: ${flags.resume === undefined ? "missing required argument 'env'" : 'pass an env or --resume <run-id>, not both: a resumed run takes its env and settings from its journal'}\n(run with --help for usage)\n`);
        io.exitCode = 2;
        return;
      }
      const { serveEnv, otelConfig } = await core();
      const otel = otelConfig(process.env, flags.otel);
      // A long-lived server keeps little per episode, but under load V8 lets its heap grow to several
      // times what is live before a full collection: RSS 147 MB after 1,000 served episodes, 263 after
      // 10,000, with 11 MB more live (bench/serve-memory.bench.ts). Growing the heap by 30 % at a time
      // holds it near what is live (the command's process only: a library user's flags are theirs).
      setFlagsFromString(`--heap-growing-percent=${SERVE_HEAP_GROWING_PERCENT}`);
      const controller = new AbortController();
      let folder = 'the run folder';
      const stop = abortOnSignals(controller, io, 'stopping: open sessions end as interrupted, the run folder is being closed');
      try {
        const summary = await serveEnv(
          {
            env: envSpec ?? '',
            ...(flags.resume !== undefined ? { resume: flags.resume } : {}),
            listen: flags.port,
            host: flags.host,
            ...(flags.token !== undefined ? { token: flags.token } : {}),
            maxSessions: flags.maxSessions,
            ...(flags.allowAgentPrograms ? { agentPrograms: true } : {}),
            ...(flags.llmBaseUrl.length > 0 ? { inferenceUrls: flags.llmBaseUrl } : {}),
            ...(flags.workers !== undefined ? { workers: { store: flags.workers, queue: flags.queue } } : {}),
            maxSteps: flags.maxSteps,
            httpIdleMs: flags.httpIdle,
            wsTimeoutMs: flags.wsTimeout,
            split: flags.split,
            seed: flags.seed,
            out: flags.out,
            store: flags.store,
            ...(flags.runPort !== undefined ? { runPort: flags.runPort } : {}),
            toolOptions: flags.toolOption,
            ...(Object.keys(flags.rewardSource).length > 0 ? { rewardSources: flags.rewardSource } : {}),
            ...(otel ? { otel } : {}),
            onListening: ({ url, dir, tasks }) => {
              folder = dir;
              if (flags.json) io.stdout.write(`${JSON.stringify({ type: 'listening', url, ws: `${url.replace(/^http/, 'ws')}/ws`, dir, tasks })}\n`);
              io.stderr.write(`agent serve: ${envSpec ?? `run ${flags.resume ?? ''}`} on ${url} (WebSocket ${url.replace(/^http/, 'ws')}/ws)${tasks > 0 ? `, ${tasks} tasks (reset with task_id)` : ''}; recording to ${dir}\n`);
            },
            onResumed: ({ steps, episodesFinished, lostSteps }) =>
              io.stderr.write(`agent serve: resumed: ${episodesFinished} episode(s) finished before, ${steps} step(s) kept${lostSteps > 0 ? `, ${lostSteps} step(s) the folder showed that Redis had lost` : ''}; episodes open when it stopped end client_lost\n`),
          },
          controller.signal,
        );
        if (flags.json) io.stdout.write(`${JSON.stringify({ type: 'summary', summary })}\n`);
        io.stderr.write(`agent serve: ${summary.episodes.finished} episode(s), ${summary.steps.total} step(s) recorded in ${folder}\n`);
      } finally {
        stop();
      }
    });
}
