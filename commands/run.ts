/** `agent run <env-dir>`: run episodes of an env with a policy and write a run folder. */
import type { Command } from 'commander';
import type { JsonValue, RunSummary } from '../src/internal.js';
import { core, ui } from './lib.js';
import { abortOnSignals } from './interrupt.js';
import { addLlmOptions, addProgramOptions, durationOption, integer, llmSettings, threadsOption, OTEL_HELP, positiveInt, programLimits, rewardSource, sandboxWarning, toolOption, addSandboxOption, type LlmFlags, type ProgramFlags, type SandboxFlags } from './options.js';
import type { Io } from './io.js';
import { RUN_DEFAULTS } from '../src/shared/defaults.js';

interface RunFlags extends LlmFlags, ProgramFlags, SandboxFlags {
  instruction?: string;
  episodes: number;
  concurrency: number;
  threads: number | 'auto';
  maxSteps: number;
  policy: string;
  seed: number;
  out: string;
  store: string;
  resume?: string;
  storeWait: number;
  json?: boolean;
  port?: number;
  host: string;
  token?: string;
  distributed?: boolean;
  queue: string;
  otel?: string;
  toolOption: Record<string, JsonValue>;
  rewardSource: Record<string, JsonValue>;
}

export function registerRun(program: Command, io: Io): void {
  const command = program
    .command('run')
    .description('Run episodes of an environment with a policy; show them live and write a run folder.')
    .argument('[env-dir]', 'environment folder (state/action/reward schemas and tools, or env.json); not with --resume')
    .option('--episodes <n>', 'episodes to run', positiveInt, RUN_DEFAULTS.episodes)
    .option('--concurrency <c>', 'episodes in flight at once', positiveInt, RUN_DEFAULTS.concurrency)
    .option('--threads <n>', "worker threads the episodes spread over, each with its own copy of the env and the policy (this process keeps the folder and the live view); 'auto': the machine's cores once there are 500 episodes per thread, for a run that can share them (not with a Redis --store, --port, --otel or a cmd: policy)", threadsOption, 'auto')
    .option('--max-steps <m>', 'steps per episode at most', positiveInt, RUN_DEFAULTS.maxSteps)
    .option('--policy <policy>', "'random', llm:<model> (a model with tool calling: see --llm-base-url, --tokens), cmd:'<command line>' (an agent program, started once per episode: see --llm-base-url, --tokens), or a module exporting (observation, ctx) => action | null", RUN_DEFAULTS.policy)
    .option('--instruction <text>', "with an llm: or cmd: policy: what the user asks in each episode (default: the env's description)")
    .option('--seed <s>', 'seed for the policy, the tools and simulated latency', integer, RUN_DEFAULTS.seed)
    .option('--out <dir>', 'parent folder of run folders', RUN_DEFAULTS.out)
    .option('--store <url>', "where episode states live while they run: 'memory', or redis://host:port/db (default: $AGENT_STORE, else memory)", process.env['AGENT_STORE'] ?? 'memory')
    .option('--resume <run-id>', 'continue a run after its process stopped (killed, crashed, interrupted), from its journal in the Redis --store')
    .addOption(durationOption('--store-wait <duration>', 'with a Redis store: how long to wait for Redis when it goes away before stopping (resumable)', RUN_DEFAULTS.storeWaitMs))
    .option('--tool-option <key=value>', 'option passed to the tools module (repeatable)', toolOption, {})
    .option('--reward-source <source=binding>', "replace a reward source's binding for this run: a JSON file or inline JSON, as in env.json reward_sources (repeatable)", rewardSource, {})
    .option('--port <port>', 'serve POST /rewards, GET /events … on 127.0.0.1:<port> while the run is live (0: any free port); clients need the token in <run>/server.json', integer)
    .option('--host <address>', 'with --port: the address to serve on (another than 127.0.0.1, e.g. 0.0.0.0, only with --token)', RUN_DEFAULTS.host)
    .option('--token <secret>', 'with --port: the bearer token clients must send (default: $AGENT_TOKEN, else a fresh one)', process.env['AGENT_TOKEN'])
    .option('--distributed', 'run the episodes on `agent worker` processes (needs a Redis --store): this process queues them, shows them live and writes the run folder')
    .option('--queue <name>', 'with --distributed: the queue the workers take episodes from', RUN_DEFAULTS.queue)
    .option('--otel <url>', OTEL_HELP)
    .option('--json', 'print events as JSON lines on stdout, and nothing else there');
  addSandboxOption(addProgramOptions(addLlmOptions(command)))
    .addHelpText('after', '\nExamples:\n  agent run fixtures/weather\n  agent run ./envs/weather --episodes 200 --concurrency 64 --tool-option latency_scale=0.1\n  agent run fixtures/weather --json > events.jsonl\n  agent run fixtures/weather --store redis://127.0.0.1:6379/0\n  agent run --resume 20261130-101500-3fa2c1 --store redis://127.0.0.1:6379/0\n  agent run fixtures/weather --store redis://127.0.0.1:6379/0 --distributed --episodes 1000\n  agent run fixtures/weather --reward-source llm_score=fixtures/weather/judges/claude.json\n  agent run fixtures/lookup --policy llm:Qwen/Qwen2.5-0.5B-Instruct --llm-base-url http://127.0.0.1:8000/v1 --tokens --instruction "What is the code behind the key \'amber-fox\'?"\n  agent run fixtures/weather --policy cmd:\'python3 my_agent.py\' --llm-base-url http://127.0.0.1:8000/v1 --tokens')
    .action(async (envDir: string | undefined, flags: RunFlags) => {
      if ((envDir === undefined) === (flags.resume === undefined)) {
        io.stderr.write(`error: ${flags.resume === undefined ? "missing required argument 'env-dir'" : 'pass an env folder or --resume <run-id>, not both: a resumed run takes its env and settings from its journal'}\n(run with --help for usage)\n`);
        io.exitCode = 2;
        return;
      }
      io.exitCode = await runCommand(envDir, flags, io);
    });
}

async function runCommand(envDir: string | undefined, flags: RunFlags, io: Io): Promise<number> {
  const { Run, attachJsonReporter, attachPlainReporter, isLoopback, otelConfig, UsageError } = await core();
  const llmFlags = Object.keys(llmSettings(flags));
  const modelDriven = flags.policy.startsWith('llm:') || flags.policy.startsWith('cmd:');
  if (!modelDriven && (llmFlags.length > 0 || flags.instruction !== undefined)) throw new UsageError(`${flags.instruction !== undefined ? '--instruction' : 'the --llm-*, --tokens and sampling flags'} go with an llm: or cmd: policy (got --policy ${flags.policy})`, 'Pass --policy llm:<model> or cmd:<command line>, or drop them.');
  const program = programLimits(flags);
  if (program.misplaced) throw new UsageError(`${program.misplaced} goes with a cmd: policy (got --policy ${flags.policy})`, "Pass --policy cmd:'<command line>', or drop it.");
  const otel = otelConfig(process.env, flags.otel);
  const run = await Run.prepare({
    env: envDir ?? '',
    ...(flags.resume !== undefined ? { resume: flags.resume } : {}),
    storeWaitMs: flags.storeWait,
    episodes: flags.episodes,
    concurrency: flags.concurrency,
    threads: flags.threads,
    maxSteps: flags.maxSteps,
    policy: flags.policy,
    ...(modelDriven ? { llm: { ...llmSettings(flags), ...(flags.instruction !== undefined ? { instruction: flags.instruction } : {}) } } : {}),
    ...(program.limits ? { program: program.limits } : {}),
    ...(flags.sandbox ? { sandbox: flags.sandbox } : {}),
    seed: flags.seed,
    out: flags.out,
    store: flags.store,
    toolOptions: flags.toolOption,
    ...(flags.port !== undefined ? { port: flags.port, host: flags.host, ...(flags.token ? { token: flags.token } : {}) } : {}),
    ...(flags.distributed ? { distributed: true, queue: flags.queue } : {}),
    ...(Object.keys(flags.rewardSource).length > 0 ? { rewardSources: flags.rewardSource } : {}),
    ...(otel ? { otel } : {}),
  });
  for (const w of run.definition.warnings) io.stderr.write(`warning: ${w.file ?? ''} ${w.pointer}: ${w.message}\n`);
  const unsafe = sandboxWarning(flags, run.definition);
  if (unsafe) io.stderr.write(unsafe);
  // The server's token is printed once, before a live view takes the terminal (never into events).
  const token = run.server?.token;
  if (token !== undefined) {
    io.stderr.write(`server token: ${flags.token ? '(as given)' : token} — clients send Authorization: Bearer <token>; URL and token are in <run>/server.json while the run is live\n`);
    if (!isLoopback(flags.host)) io.stderr.write(`warning: serving on ${flags.host}: anyone who can reach this machine and has the token can post rewards and read the run\n`);
    // The browser console is at / of the same server; its page takes the token from the URL's fragment.
    const off = run.events.on('run_started', (e) => {
      off();
      if (e.url !== undefined) io.stderr.write(`web console: ${e.url}/#token=${flags.token ? '<your token>' : token}\n`);
    });
  }
  const controller = new AbortController();
  const stopListening = abortOnSignals(controller, io, 'interrupted: cancelling calls in flight and flushing the run folder (Ctrl-C again to exit at once)');
  // `agent run --json | head`: once the reader is gone, stop the run as if interrupted, quietly.
  const onStdoutError = (err: NodeJS.ErrnoException): void => {
    if (!controller.signal.aborted) controller.abort(new Error(`stdout closed (${err.code ?? err.message})`));
  };
  io.stdout.on('error', onStdoutError);
  // Progress goes to stderr (the live view when it is a terminal), the result to stdout: the
  // summary and the run folder, or with --json the events.
  const tty = io.stderr.isTTY === true && !flags.json;
  const reporter = flags.json
    ? attachJsonReporter(run, io.stdout)
    : tty
      ? (await ui()).renderRunView(run, io.stderr as NodeJS.WriteStream, io.stdout)
      : attachPlainReporter(run, { out: io.stderr, err: io.stderr, summary: io.stdout });
  let summary: RunSummary | undefined;
  try {
    summary = await run.execute(controller.signal);
  } finally {
    stopListening();
    reporter.close(flags.json ? undefined : summary);
  }
  (flags.json ? io.stderr : io.stdout).write(`run folder: ${run.dir}\n`);
  // Late writes to a closed pipe would raise 'error' again; keep listening until the process ends.
  if (!controller.signal.aborted) io.stdout.off('error', onStdoutError);
  if (summary.problem) {
    io.stderr.write(`error: ${summary.problem}\n`);
    return 1;
  }
  if (summary.status === 'interrupted') return 130;
  return 0;
}

