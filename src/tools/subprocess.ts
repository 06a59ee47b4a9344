/**
 * One-shot subprocess tools: one process per call, the request as JSON on stdin, the answer as
 * JSON on stdout. Each call's process leads its own process group, so everything it started
 * (a shell's background job, a Python multiprocessing child) dies with the call: on timeout, on
 * cancel, and once the answer is in. The answer is complete when stdout holds a whole JSON line
 * or the process has exited, not when every inherited copy of stdout is closed, so a leftover
 * grandchild can neither turn an answered call into a timeout nor keep the run alive.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { ToolError } from '../shared/errors.js';
import type { JsonObject } from '../shared/json.js';
import { EXIT_RETRYABLE, parseReply, requestBody, type Executor } from './executors.js';
import { processStarts, trackGroup, type StartSlot } from './process-starts.js';
import type { ToolContext } from './types.js';

/** Default cap on what a tool may write to stdout (and an HTTP tool may answer): 16 MB. */
export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
const STDERR_TAIL = 4_096;

export interface SubprocessOptions {
  readonly cwd: string;
  readonly env?: Readonly<Record<string, string>> | undefined;
  readonly maxOutputBytes?: number | undefined;
}

/** Kill a process group, ignoring one that is already gone. */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group has exited already.
  }
}

/**
 * `<what happened>: <the last line of stderr>`, then the lines before it: a traceback's last line
 * (`KeyError: 'balanc'`) names the cause, so it goes where one-line reports will show it.
 */
export function crashMessage(what: string, stderr: string, lines = 6): string {
  const tail = stderr.split('\n').filter((l) => l.trim() !== '').slice(-lines);
  const last = tail.pop();
  return last === undefined ? what : `${what}: ${last.trim()}${tail.length > 0 ? `\n${tail.join('\n')}` : ''}`;
}

export function subprocessExecutor(tool: string, command: readonly string[], options: SubprocessOptions): Executor {
  const shown = command.join(' ');
  return (params, ctx) => runOnce(tool, command, shown, options, params, ctx);
}

/** The call's environment: the process's, the tool's own variables, and its trace context when traced. */
function callEnv(env: Readonly<Record<string, string>> | undefined, traceparent: string | undefined): NodeJS.ProcessEnv {
  if (traceparent !== undefined) return { ...process.env, ...env, TRACEPARENT: traceparent };
  return env ? { ...process.env, ...env } : process.env;
}

/** A start that failed for want of file descriptors or processes: the call waits for another to end. */
const OUT_OF_RESOURCES = new Set(['EMFILE', 'ENFILE', 'EAGAIN']);

async function runOnce(tool: string, command: readonly string[], shown: string, options: SubprocessOptions, params: JsonObject, ctx: ToolContext): Promise<unknown> {
  const signal = ctx.signal;
  const [file, ...args] = command as [string, ...string[]];
  for (;;) {
    // A call cancelled while it waits for its turn to start never starts a process.
    const slot = await processStarts.acquire(signal);
    let child: ChildProcessWithoutNullStreams;
    try {
      child = spawn(file, args, { cwd: options.cwd, env: callEnv(options.env, ctx.traceparent), stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    } catch (err) {
      slot.done();
      throw err;
    }
    if (child.pid !== undefined) {
      // In flight until the child reports it started (a later tick): a burst of calls forks at most
      // `limit` processes before the queue makes the rest wait a turn of the event loop.
      child.once('spawn', () => slot.started());
      return talk(child, slot, tool, shown, options, params, ctx);
    }
    // Not started: the reason comes as an 'error' event.
    const [err] = (await once(child, 'error')) as [NodeJS.ErrnoException];
    slot.done();
    if (OUT_OF_RESOURCES.has(err.code ?? '') && processStarts.size.running > 0) {
      processStarts.exhausted();
      continue;
    }
    throw new ToolError('TOOL_FAILED', tool, `cannot start '${shown}' (${err.code ?? err.message})`, {
      cause: err,
      retryable: OUT_OF_RESOURCES.has(err.code ?? ''),
      hint: OUT_OF_RESOURCES.has(err.code ?? '') ? 'The machine is out of file descriptors or processes: lower the concurrency, or raise the limits (ulimit -n, ulimit -u).' : 'Check the "command" of this tool in env.json and that the program is installed.',
    });
  }
}

/** One started call: the request on stdin, the answer from stdout, everything it left running killed at the end. */
function talk(child: ChildProcessWithoutNullStreams, slot: StartSlot, tool: string, shown: string, options: SubprocessOptions, params: JsonObject, ctx: ToolContext): Promise<unknown> {
  const signal = ctx.signal;
  const max = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  return new Promise<unknown>((resolve, reject) => {
    const untrack = trackGroup(child.pid);
    const chunks: Buffer[] = [];
    let size = 0;
    let stderr = '';
    let exited: { readonly code: number | null; readonly sig: NodeJS.Signals | null } | undefined;
    let settled = false;
    let stdoutEnded = false;

    const finish = (outcome: () => unknown): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      // Whatever the call left running (the tool itself if it answered and lingers, its children) goes.
      killGroup(child.pid);
      untrack();
      slot.done();
      child.stdout.destroy();
      child.stderr.destroy();
      try {
        resolve(outcome());
      } catch (err) {
        reject(err);
      }
    };
    const fail = (err: unknown): void => finish(() => {
      throw err;
    });
    const onAbort = (): void => fail(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    // Aborted between its start and here (the start waited its turn): the process goes at once.
    if (signal.aborted) onAbort();

    const stdoutText = (): string => Buffer.concat(chunks, size).toString('utf8');
    const parses = (text: string): boolean => {
      try {
        JSON.parse(text);
        return true;
      } catch {
        return false;
      }
    };
    /**
     * Settle if the answer is complete: a first line that parses (whatever the process does next),
     * or, once the process has exited, all of stdout (at its end, or as soon as it parses while a
     * grandchild still holds the pipe open).
     */
    let firstLineJudged = false;
    const judge = (): void => {
      if (settled) return;
      // The first line is looked at once, when it is complete: a pretty-printed answer (its first
      // line is "{") is judged as a whole at exit, without re-reading stdout on every chunk.
      if (!firstLineJudged) {
        const nl = chunks.findIndex((c) => c.includes(10));
        if (nl >= 0) {
          firstLineJudged = true;
          const text = stdoutText();
          const line = text.slice(0, text.indexOf('\n'));
          if (parses(line)) return finish(() => parseReply(line, tool, 'stdout'));
        }
      }
      if (!exited) return;
      const text = stdoutText();
      const { code, sig } = exited;
      if (code !== 0) {
        const retryable = code === EXIT_RETRYABLE;
        // EX_TEMPFAIL is the tool saying "try again"; any other exit is a crash (a traceback, an uncaught exception).
        return fail(new ToolError(retryable ? 'TOOL_FAILED' : 'TOOL_CRASHED', tool, crashMessage(`'${shown}' exited with ${sig ? `signal ${sig}` : `code ${code}`}`, stderr), { retryable }));
      }
      if (stdoutEnded || parses(text)) finish(() => parseReply(text.trim(), tool, 'stdout'));
    };

    child.stdout.on('data', (c: Buffer) => {
      if (settled) return;
      size += c.length;
      if (size > max) {
        fail(new ToolError('TOOL_OUTPUT_TOO_LARGE', tool, `'${shown}' wrote more than ${max} bytes to stdout`, {
          hint: 'Return less (a summary, an id to fetch the rest), or raise "max_output_bytes" for this tool in env.json.',
        }));
        return;
      }
      chunks.push(c);
      // After the exit, re-judge only on a chunk that could end a JSON document (cheap to tell).
      if ((!firstLineJudged && c.includes(10)) || (exited && /[}\]"\d\w]\s*$/.test(c.toString('utf8', Math.max(0, c.length - 8))))) judge();
    });
    child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-STDERR_TAIL)));
    child.on('error', (err: NodeJS.ErrnoException) => {
      fail(new ToolError('TOOL_FAILED', tool, `cannot start '${shown}' (${err.code ?? err.message})`, {
        cause: err,
        hint: 'Check the "command" of this tool in env.json and that the program is installed.',
      }));
    });
    child.stdout.on('end', () => {
      stdoutEnded = true;
      judge();
    });
    // 'exit' can come before stdout is drained, so judge again on the next turn (stderr too has landed then).
    child.on('exit', (code, sig) => {
      exited = { code, sig };
      setImmediate(judge);
    });
    child.stdin.on('error', () => {
      // EPIPE: the tool exited without reading its request; its exit status tells what happened.
    });
    child.stdin.end(requestBody(tool, params, ctx));
  });
}
