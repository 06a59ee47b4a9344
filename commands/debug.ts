/**
 * `agent debug`: the console on a terminal (`agent debug <run-dir>`, following a folder still being
 * written, or `agent debug --attach <host:port>` to a live `agent run --port`), and for scripts
 * and tests the non-interactive forms: a trace's events and timings, an episode's state at a seq
 * or time, and the history of one field, all rebuilt from the run folder.
 */
import { InvalidArgumentError, type Command } from 'commander';
import type { Io } from './io.js';
import { core, ui } from './lib.js';
import { spawn } from 'node:child_process';
import { abortOnSignals } from './interrupt.js';
import { wholeNumber } from './options.js';

interface Flags {
  trace?: string;
  state?: number;
  at?: number;
  time?: number;
  field?: number;
  json?: boolean;
  attach?: string;
  token?: string;
  follow?: boolean;
  web?: boolean;
  port?: number;
  host: string;
  consoleToken?: string;
  open?: boolean;
}

function isoTime(v: string): number {
  const t = Date.parse(v);
  if (Number.isNaN(t)) throw new InvalidArgumentError('expected an ISO time such as 2026-11-30T10:15:00Z.');
  return t;
}

export function registerDebug(program: Command, io: Io): void {
  program
    .command('debug')
    .description("Look into a run folder: a trace's events and timings (--trace), an episode's state at any seq or time (--state), one field's history (--field).")
    .argument('[run-dir]', 'a run folder (runs/<run-id>); not with --attach')
    .argument('[pointer]', 'with --field: the JSON pointer of the field, e.g. /current_weather/temperature')
    .option('--trace <id>', "a trace's events, with their offsets from its dispatch")
    .option('--state <episode>', "an episode's state (its last, or --at / --time)", wholeNumber)
    .option('--at <seq>', 'with --state: the state after this seq', wholeNumber)
    .option('--time <iso>', 'with --state: the state as it stood at this time', isoTime)
    .option('--field <episode>', 'every change to the field at <pointer> in this episode', wholeNumber)
    .option('--json', 'print JSON')
    .option('--attach <address>', 'open the console on a live run: its run folder (reads server.json), or the --port of `agent run` (host:port, or just the port) with --token')
    .option('--token <secret>', "with --attach host:port: the run server's token (default: $AGENT_TOKEN)", process.env['AGENT_TOKEN'])
    .option('--no-follow', 'open a folder as it is now, without following what the run appends')
    .option('--web', 'the console in the browser instead of the terminal: serves it on 127.0.0.1 and prints its URL')
    .option('--port <port>', 'with --web: the port to serve on (default: any free one)', wholeNumber)
    .option('--host <address>', 'with --web: the address to serve on (another than 127.0.0.1 only with --console-token)', '127.0.0.1')
    .option('--console-token <secret>', "with --web: the token the page needs (default: a fresh one, in the printed URL's #token=)")
    .option('--open', 'with --web: open the URL in the default browser')
    .addHelpText(
      'after',
      '\nThe console (on a terminal): panes Traces, Timeline, State, Rewards, Validation; ? for keys.\nThe web console (--web): the same views in a browser, linked (a trace → its timeline → the state at its seq).\nA run served with agent run --port has it at / too.\n\nExamples:\n  agent debug runs/20261130-101500-3fa2c1\n  agent debug --web runs/20261130-101500-3fa2c1 --open\n  agent debug --web --attach 127.0.0.1:7070 --token $AGENT_TOKEN\n  agent debug --attach runs/20261130-101500-3fa2c1\n  agent debug --attach 127.0.0.1:7070 --token $AGENT_TOKEN\n  agent debug runs/20261130-101500-3fa2c1 --trace ep-3:7\n  agent debug runs/20261130-101500-3fa2c1 --state 3 --at 5 --json\n  agent debug runs/20261130-101500-3fa2c1 --field 3 /current_weather/temperature',
    )
    .action(async (dir: string | undefined, pointer: string | undefined, flags: Flags) => {
      io.exitCode = await debugCommand(dir, pointer, flags, io);
    });
}

async function debugCommand(dir: string | undefined, pointer: string | undefined, flags: Flags, io: Io): Promise<number> {
  const chosen = [flags.trace !== undefined, flags.state !== undefined, flags.field !== undefined].filter(Boolean).length;
  const usage = (message: string): number => {
    io.stderr.write(`error: ${message}\n(run with --help for usage)\n`);
    return 2;
  };
  if (flags.attach !== undefined && (dir !== undefined || chosen > 0)) return usage('--attach opens the console on a live run: pass no run folder and no --trace/--state/--field with it');
  if (flags.attach === undefined && dir === undefined) return usage('pass a run folder (agent debug runs/<run-id>) or --attach <host:port>');
  const webOnly = [flags.port !== undefined && '--port', flags.open && '--open', flags.consoleToken !== undefined && '--console-token', flags.host !== '127.0.0.1' && '--host'].filter((f): f is string => typeof f === 'string');
  if (!flags.web && webOnly.length > 0) return usage(`${webOnly.join(', ')} go${webOnly.length === 1 ? 'es' : ''} with --web`);
  if (flags.web && chosen > 0) return usage('--web opens the console: pass no --trace/--state/--field with it');
  if (flags.web) return webCommand(dir, flags, io);
  if (chosen === 0) return consoleCommand(dir, flags, io);
  if (chosen !== 1) return usage('pass one of --trace <id>, --state <episode> or --field <episode> <pointer>');
  if ((flags.at !== undefined || flags.time !== undefined) && flags.state === undefined) return usage('--at and --time go with --state');
  if (flags.at !== undefined && flags.time !== undefined) return usage('pass --at or --time, not both');
  if (flags.field !== undefined && pointer === undefined) return usage('--field needs the pointer of the field: agent debug <run-dir> --field <episode> <pointer>');
  const { inspectTrace, inspectState, inspectField } = await core();
  const print = (value: unknown, text: () => string): void => void io.stdout.write(flags.json ? `${JSON.stringify(value, null, 2)}\n` : text());
  if (flags.trace !== undefined) {
    const t = await inspectTrace(dir as string, flags.trace);
    print(t, () =>
      [
        `trace ${t.trace_id} (episode ${t.episode}): ${t.action}${t.actor === 'user' ? ' (by the user)' : ''} ${JSON.stringify(t.params)} → ${t.status}${t.duration_ms !== undefined ? ` in ${t.duration_ms.toFixed(1)} ms` : ''}${t.attempts !== undefined ? `, ${t.attempts} attempt${t.attempts === 1 ? '' : 's'}` : ''}`,
        ...(t.error ? [`  error: ${JSON.stringify(t.error)}`] : []),
        ...commandOutput(t.observation),
        ...(t.files ? [`  files: ${[...t.files.added.map((f) => `+${f}`), ...t.files.changed.map((f) => `~${f}`), ...t.files.removed.map((f) => `-${f}`)].join('  ') || 'unchanged'}`] : []),
        ...t.events.map((e) => `  +${e.at_ms.toFixed(0).padStart(6)} ms  ${e.type.padEnd(16)} ${e.detail !== undefined ? JSON.stringify(e.detail) : ''}`.trimEnd()),
      ].join('\n') + '\n',
    );
  } else if (flags.state !== undefined) {
    const s = await inspectState(dir as string, flags.state, { ...(flags.at !== undefined ? { seq: flags.at } : {}), ...(flags.time !== undefined ? { time: flags.time } : {}) });
    print(s, () => `episode ${s.episode} (${s.instance_id}) at seq ${s.seq}${s.time ? ` (${s.time})` : ''}:\n${JSON.stringify(s.state, null, 2)}\n`);
  } else {
    const f = await inspectField(dir as string, flags.field as number, pointer as string);
    print(f, () => [`episode ${f.episode}, ${f.pointer}: ${f.changes.length - 1} change${f.changes.length === 2 ? '' : 's'}`, ...f.changes.map((c) => `  seq ${String(c.seq).padStart(4)}  ${c.time.padEnd(24)} ${(c.trace_id ?? '').padEnd(10)} ${'value' in c ? JSON.stringify(c.value) : c.seq === 0 ? '(absent)' : '(removed)'}`)].join('\n') + '\n');
  }
  return 0;
}

/** The interactive console: a terminal only (it reads keys and redraws); scripts get the forms above. */
async function consoleCommand(dir: string | undefined, flags: Flags, io: Io): Promise<number> {
  if (!io.stdout.isTTY || !process.stdin.isTTY) {
    io.stderr.write(
      `error: the debug console needs a terminal (stdin and stdout a TTY)\nFor scripts, use the non-interactive forms:\n  agent debug ${dir ?? '<run-dir>'} --trace <id> [--json]\n  agent debug ${dir ?? '<run-dir>'} --state <episode> [--at <seq> | --time <iso>] [--json]\n  agent debug ${dir ?? '<run-dir>'} --field <episode> <pointer> [--json]\n`,
    );
    return 2;
  }
  const { AttachFeed, FolderFeed } = await core();
  const feed = flags.attach !== undefined ? await AttachFeed.connect(flags.attach, flags.token ? { token: flags.token } : {}) : await FolderFeed.open(dir as string, { follow: flags.follow !== false });
  try {
    // NO_COLOR (https://no-color.org): any non-empty value turns colour off.
    await (await ui()).renderDebugConsole(feed, { stdout: io.stdout as NodeJS.WriteStream, color: !process.env['NO_COLOR'] });
  } finally {
    await feed[Symbol.asyncDispose]();
  }
  return 0;
}

/** The console in the browser: served until Ctrl-C. */
async function webCommand(dir: string | undefined, flags: Flags, io: Io): Promise<number> {
  const { serveWebConsole } = await core();
  const controller = new AbortController();
  const stop = abortOnSignals(controller, io, 'stopping the web console');
  try {
    await serveWebConsole(
      {
        ...(dir !== undefined ? { runDir: dir } : {}),
        ...(flags.attach !== undefined ? { attach: flags.attach } : {}),
        ...(flags.token !== undefined ? { attachToken: flags.token } : {}),
        follow: flags.follow !== false,
        ...(flags.port !== undefined ? { port: flags.port } : {}),
        host: flags.host,
        ...(flags.consoleToken !== undefined ? { token: flags.consoleToken } : {}),
        onListening: ({ url, feed }) => {
          if (flags.json) io.stdout.write(`${JSON.stringify({ type: 'listening', url, title: feed.title })}\n`);
          else io.stdout.write(`${url}\n`);
          io.stderr.write(`agent debug --web: ${feed.title} at the URL above (its #token= part lets the page in; keep it to yourself). Ctrl-C to stop.\n`);
          if (flags.open) openBrowser(url, io);
        },
      },
      controller.signal,
    );
  } finally {
    stop();
  }
  return 0;
}

/** The platform's "open this URL" command; where there is none, the URL printed is the way in. */
function openBrowser(url: string, io: Io): void {
  const [cmd, args] = process.platform === 'darwin' ? ['open', [url]] : process.platform === 'win32' ? ['cmd', ['/c', 'start', '', url]] : ['xdg-open', [url]];
  const child = spawn(cmd, args, { stdio: 'ignore', detached: true });
  child.once('error', () => io.stderr.write(`could not start ${cmd} to open a browser: open the URL above by hand\n`));
  child.unref();
}

/** A sandboxed command's result (a sandbox tool's observation), as lines: how it ended, then its stdout and stderr. */
function commandOutput(observation: unknown): string[] {
  if (typeof observation !== 'object' || observation === null) return [];
  const o = observation as Record<string, unknown>;
  if (typeof o['stdout'] !== 'string' || typeof o['stderr'] !== 'string' || !('exit_code' in o)) return [];
  const ended = o['timed_out'] === true ? 'timed out' : o['oom'] === true ? 'out of memory' : o['signal'] ? `killed by ${String(o['signal'])}` : `exit ${String(o['exit_code'])}`;
  const block = (name: string, text: string, bytes: unknown): string[] =>
    text === '' ? [] : [`  ${name}${typeof bytes === 'number' && bytes > Buffer.byteLength(text) ? ` (first ${Buffer.byteLength(text)} of ${bytes} bytes)` : ''}:`, ...text.replace(/\n$/, '').split('\n').map((l) => `    | ${l}`)];
  return [`  command: ${ended}${typeof o['duration_ms'] === 'number' ? ` in ${o['duration_ms']} ms` : ''}`, ...block('stdout', o['stdout'], o['stdout_bytes']), ...block('stderr', o['stderr'], o['stderr_bytes'])];
}
