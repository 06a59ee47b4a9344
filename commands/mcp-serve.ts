/**
 * `agent mcp-serve <env-dir>`: the env as an MCP server on stdin/stdout, for an MCP client (an IDE
 * agent, Claude Desktop) to act in; every call is a recorded, rewarded step of a run. stdout is the
 * protocol: everything for people goes to stderr.
 */
import type { Command } from 'commander';
import { abortOnSignals } from './interrupt.js';
import type { Io } from './io.js';
import { core } from './lib.js';
import { integer, positiveInt, toolOption } from './options.js';
import { MCP_SERVE_DEFAULTS, RUN_DEFAULTS } from '../src/shared/defaults.js';

interface Flags {
  episodes: number;
  maxSteps: number;
  seed: number;
  out: string;
  port?: number;
  toolOption: Record<string, string>;
}

export function registerMcpServe(program: Command, io: Io): void {
  program
    .command('mcp-serve')
    .description('Serve an env as an MCP server on stdin/stdout: each enabled action a tool (plus reset), the state a resource; every call a recorded step of a run.')
    .argument('<env-dir>', 'environment folder')
    .option('--episodes <n>', 'episodes at most (reset starts the next one)', positiveInt, MCP_SERVE_DEFAULTS.episodes)
    .option('--max-steps <m>', 'steps per episode at most', positiveInt, MCP_SERVE_DEFAULTS.maxSteps)
    .option('--seed <s>', 'seed for the tools', integer, RUN_DEFAULTS.seed)
    .option('--out <dir>', 'parent folder of run folders', RUN_DEFAULTS.out)
    .option('--port <port>', 'also serve POST /rewards and GET /events on 127.0.0.1:<port> (0: any free port)', integer)
    .option('--tool-option <key=value>', 'option passed to the tools module (repeatable)', toolOption, {})
    .addHelpText(
      'after',
      '\nAn MCP client starts it outside any project: name the command and the env by their paths, e.g.\n  {"command": "/home/me/my-project/node_modules/.bin/agent", "args": ["mcp-serve", "/home/me/my-project/fixtures/weather"]}\n\nThe run folder (runs/<id>) is named on stderr; `agent debug runs/<id>` follows it.',
    )
    .action(async (envDir: string, flags: Flags) => {
      const { serveEnvOverStdio } = await core();
      // A tools module that logs with console.log would write into the protocol stream.
      console.log = console.info = console.debug = console.error;
      const controller = new AbortController();
      const stop = abortOnSignals(controller, io, 'stopping: the run folder is being closed');
      try {
        const summary = await serveEnvOverStdio(
          {
            env: envDir,
            episodes: flags.episodes,
            maxSteps: flags.maxSteps,
            seed: flags.seed,
            out: flags.out,
            toolOptions: flags.toolOption,
            ...(flags.port !== undefined ? { port: flags.port } : {}),
            onReady: (dir) => io.stderr.write(`agent mcp-serve: env ${envDir}, recording to ${dir}; serving MCP on stdin/stdout (agent debug ${dir} follows it)\n`),
          },
          controller.signal,
        );
        io.stderr.write(`agent mcp-serve: ${summary.episodes.finished} episode(s), ${summary.steps.total} step(s) recorded\n`);
      } finally {
        stop();
      }
    });
}
