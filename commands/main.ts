/**
 * The `agent` command line. `createProgram` only parses (tests drive it without side effects);
 * `main` runs it and is the one place that turns errors into exit codes and messages:
 * 0 ok · 1 the check failed (or an internal error, with a stack and a request to report it) ·
 * 2 bad usage or bad input, with a one-line hint · 130 interrupted.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import type { Io } from './io.js';
import { core } from './lib.js';
import { registerRun } from './run.js';
import { registerSchemaDiff } from './schema-diff.js';
import { registerFuzz } from './fuzz.js';
import { registerDoctor } from './doctor.js';
import { registerReward } from './reward.js';
import { registerExport } from './export.js';
import { registerBenchmark } from './benchmark.js';
import { registerDebug } from './debug.js';
import { registerMcpServe } from './mcp-serve.js';
import { registerWorker } from './worker.js';
import { registerServe } from './serve.js';
import { registerSandbox } from './sandbox.js';
import { registerDocs } from './docs.js';
import { registerRescore } from './rescore.js';

export type { Io } from './io.js';


// bin/, commands/ and dist/commands/ are all one or two levels below the package root.
const VERSION = ((): string => {
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'agentic-rl-toolkit' && pkg.version) return pkg.version;
    } catch {
      // not at this level
    }
  }
  return 'unknown';
})();

/** `onErrorPrinted`: told when commander has printed a parse error (so that it is not printed twice). */
export function createProgram(io: Io, onErrorPrinted?: () => void): Command {
  const program = new Command('agent')
    .description('The runtime for agentic RL: schema-first environments, an async env core and a resilient tool router.')
    .version(VERSION)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => void io.stdout.write(s),
      writeErr: (s) => void io.stderr.write(s),
      outputError: (s, write) => {
        onErrorPrinted?.();
        write(s);
      },
    });
  registerRun(program, io);
  registerSchemaDiff(program, io);
  registerFuzz(program, io);
  registerDoctor(program, io);
  registerReward(program, io);
  registerRescore(program, io);
  registerExport(program, io);
  registerBenchmark(program, io);
  registerDebug(program, io);
  registerMcpServe(program, io);
  registerWorker(program, io);
  registerServe(program, io);
  registerSandbox(program, io);
  registerDocs(program, io);
  return program;
}

/** Runs `agent <argv>` with the given streams and returns its exit code (0 ok, 1 failures found, 2 bad usage, 130 interrupted), never calling process.exit. */
export async function main(argv: readonly string[], io: Io = { stdout: process.stdout, stderr: process.stderr, exitCode: 0 }): Promise<number> {
  // Commander prints the errors it finds while parsing; one a command's action throws it does not.
  let printed = false;
  const program = createProgram(io, () => (printed = true));
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return io.exitCode;
  } catch (err) {
    return await reportError(err, io, printed);
  }
}

async function reportError(err: unknown, io: Io, commanderPrinted: boolean): Promise<number> {
  if (err instanceof CommanderError) {
    // Help and version are not errors; every other exit ≠ 0 says why, once.
    if (err.exitCode === 0) return 0;
    // A command of subcommands run without one: its help went to stderr; say what was missing, not commander's placeholder.
    if (err.code === 'commander.help') {
      io.stderr.write('error: name a subcommand (listed above)\n');
      return 2;
    }
    if (!commanderPrinted) io.stderr.write(`error: ${err.message}\n(run with --help for usage)\n`);
    return 2;
  }
  const { ERROR_CODES, formatIssues, isAgentError, ValidationError, describeError } = await core();
  // The input or the environment (exit 2 in the table of codes): one line and a hint, never a stack.
  if (isAgentError(err) && ERROR_CODES[err.code].exit === 2) {
    const message = err instanceof ValidationError ? `${err.message.split('\n')[0]}\n${formatIssues(err.issues)}` : err.message;
    io.stderr.write(`error: ${message}\n`);
    if (err.hint) io.stderr.write(`hint: ${err.hint}\n`);
    return 2;
  }
  // Stopped by Ctrl-C: what was stopped and where its work is, not a bug report.
  if (isAgentError(err) && err.code === 'INTERRUPTED') {
    io.stderr.write(`${err.message}\n`);
    return 130;
  }
  io.stderr.write(`internal error: ${describeError(err, { stack: true })}\nThis is a bug in agentic-rl-toolkit; please report it with the command you ran.\n`);
  return 1;
}
