/** `agent sandbox run -- CMD [ARGS…]`: one command in the sandbox code tools run in, for trying a limit and for tests. */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import type { SandboxMode, SandboxResult } from '../src/internal.js';
import { SANDBOX_DEFAULTS } from '../src/shared/defaults.js';
import type { Io } from './io.js';
import { abortOnSignals } from './interrupt.js';
import { core } from './lib.js';
import { durationOption, positiveInt } from './options.js';

interface Flags {
  workspace?: string;
  cpuS: number;
  memoryMb: number;
  pids: number;
  fileSizeMb: number;
  timeout: number;
  outputBytes: number;
  sandbox: SandboxMode;
  allowHost: string[];
  json?: boolean;
}

export function registerSandbox(program: Command, io: Io): void {
  const sandbox = program.command('sandbox').description('Run commands in the sandbox code-execution tools run in (bubblewrap: no network, no host files, bounded).');
  sandbox
    .command('run')
    .description("Run one command in a sandbox: exits with its exit code (124 at the time limit, 128 + the signal that killed it), --json prints what a code tool's observation holds.")
    .argument('<command...>', 'the command and its arguments (after --)')
    .option('--workspace <dir>', 'the folder mounted read-write at /workspace, the command\'s working folder, kept afterwards (default: a fresh one, removed)')
    .option('--cpu-s <n>', 'CPU seconds', positiveInt, SANDBOX_DEFAULTS.cpuSeconds)
    .option('--memory-mb <n>', 'memory of all its processes together, in MB', positiveInt, SANDBOX_DEFAULTS.memoryMb)
    .option('--pids <n>', 'processes at once', positiveInt, SANDBOX_DEFAULTS.pids)
    .option('--file-size-mb <n>', 'the largest file it may write, in MB', positiveInt, SANDBOX_DEFAULTS.fileSizeMb)
    .addOption(durationOption('--timeout <duration>', 'wall time: past it the sandbox and everything in it is killed', SANDBOX_DEFAULTS.timeoutMs))
    .option('--output-bytes <n>', 'bytes of stdout and of stderr kept each (the rest counted, and marked)', positiveInt, SANDBOX_DEFAULTS.outputBytes)
    .option('--sandbox <mode>', "isolated, or unsafe-host: no isolation at all (your files, your network), only the limits", (v: string) => {
      if (v !== 'isolated' && v !== 'unsafe-host') throw new InvalidArgumentError('expected isolated or unsafe-host.');
      return v;
    }, 'isolated')
    .option('--allow-host <host>', 'a host the command may reach over HTTP(S), through a proxy that admits only the listed ones (it sees HTTP_PROXY and HTTPS_PROXY): a name (pypi.org), *.domain, or an address, with :port (default: 80 and 443); repeatable. Without one, no network at all', (v: string, prev: string[]) => [...prev, v], [])
    .option('--json', 'print the result as JSON')
    .addHelpText('after', "\nExamples:\n  agent sandbox run -- python3 -c 'print(1 + 1)'\n  agent sandbox run --memory-mb 128 --timeout 5s --json -- python3 -c 'b = bytearray(10**9)'\n  agent sandbox run --workspace ./repo -- python3 -m pytest -q\n  agent sandbox run --allow-host pypi.org --allow-host files.pythonhosted.org -- pip download --no-deps -d . six")
    .action(async (argv: string[], flags: Flags) => {
      io.exitCode = await sandboxRun(argv, flags, io);
    });
}

async function sandboxRun(argv: string[], flags: Flags, io: Io): Promise<number> {
  const { Sandbox, parseAllowedHost, UsageError } = await core();
  const allowHosts = flags.allowHost.map((h) => {
    try {
      return parseAllowedHost(h);
    } catch (err) {
      throw new UsageError(`--allow-host ${(err as Error).message}`);
    }
  });
  await using box = await Sandbox.open({ mode: flags.sandbox, allowHosts });
  if (box.mechanism.mode === 'unsafe-host') io.stderr.write(`warning: --sandbox unsafe-host: the command runs with your files and your network${flags.allowHost.length > 0 ? ' (--allow-host limits nothing there)' : ''}; only its limits hold\n`);
  const workspace = flags.workspace !== undefined ? path.resolve(flags.workspace) : await mkdtemp(path.join(os.tmpdir(), 'agent-sandbox-'));
  const controller = new AbortController();
  const stopListening = abortOnSignals(controller, io, 'interrupted: killing the sandbox');
  try {
    const result = await box.run({
      argv,
      workspace,
      limits: { cpuSeconds: flags.cpuS, memoryMb: flags.memoryMb, pids: flags.pids, fileSizeMb: flags.fileSizeMb, timeoutMs: flags.timeout, outputBytes: flags.outputBytes },
      signal: controller.signal,
    });
    if (flags.json) io.stdout.write(`${JSON.stringify({ ...result, mechanism: box.mechanism }, null, 2)}\n`);
    else {
      io.stdout.write(result.stdout);
      io.stderr.write(result.stderr);
      const note = summary(result);
      if (note) io.stderr.write(`${note}\n`);
    }
    return exitCode(result);
  } catch (err) {
    if (!controller.signal.aborted) throw err;
    // The sandbox and everything in it were killed before the run ended: nothing is left running.
    io.stderr.write('sandbox: interrupted; the command and everything it started were killed\n');
    return 130;
  } finally {
    stopListening();
    if (flags.workspace === undefined) await rm(workspace, { recursive: true, force: true });
  }
}

/** What ended it, when it was not its own exit. */
function summary(r: SandboxResult): string | undefined {
  if (r.timed_out) return `sandbox: killed at the time limit after ${Math.round(r.duration_ms)} ms`;
  if (r.oom) return 'sandbox: killed at the memory limit (the OOM killer)';
  if (r.signal === 'SIGXCPU') return 'sandbox: stopped at the CPU limit (SIGXCPU)';
  if (r.signal === 'SIGXFSZ') return 'sandbox: stopped writing past the file size limit (SIGXFSZ)';
  if (r.signal !== null) return `sandbox: killed by ${r.signal}`;
  return undefined;
}

/** As `timeout(1)` and shells say it: 124 at the time limit, 128 + the signal, else the command's own code. */
function exitCode(r: SandboxResult): number {
  if (r.timed_out) return 124;
  if (r.signal !== null) return 128 + (os.constants.signals[r.signal as NodeJS.Signals] ?? 9);
  return r.exit_code ?? 1;
}
