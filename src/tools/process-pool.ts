/**
 * Long-lived subprocess tools (`"persistent": true`): a pool of processes, each answering one
 * request at a time, one JSON line in and one JSON line out. Interpreter start-up (tens of ms for
 * Python) is paid once instead of per call. A process that crashes, answers with malformed JSON
 * or outlives a call's timeout is killed; a fresh one takes its place on the next call.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { raceAbort } from '../shared/abort.js';
import { AgentError, ToolError } from '../shared/errors.js';
import type { JsonObject } from '../shared/json.js';
import { parseReply, requestBody } from './executors.js';
import { crashMessage, DEFAULT_MAX_OUTPUT_BYTES, killGroup, type SubprocessOptions } from './subprocess.js';
import { trackGroup } from './process-starts.js';
import type { ToolContext } from './types.js';

interface Proc {
  readonly child: ChildProcessWithoutNullStreams;
  /** Bytes of the reply line not yet ended by a newline. */
  partial: Buffer[];
  partialSize: number;
  /** The answer line of the request in flight. */
  pending?: { resolve: (line: string) => void; reject: (err: unknown) => void };
  stderr: string;
  busy: boolean;
  dead: boolean;
}

export class ProcessPool implements AsyncDisposable {
  readonly #tool: string;
  readonly #command: readonly string[];
  readonly #options: SubprocessOptions;
  readonly #size: number;
  readonly #procs = new Set<Proc>();
  readonly #waiting: (() => void)[] = [];
  #closed = false;

  constructor(tool: string, command: readonly string[], options: SubprocessOptions, size: number) {
    this.#tool = tool;
    this.#command = command;
    this.#options = options;
    this.#size = Math.max(1, size);
  }

  async run(params: JsonObject, ctx: ToolContext): Promise<unknown> {
    const proc = await this.#acquire(ctx.signal);
    try {
      const line = await raceAbort(
        new Promise<string>((resolve, reject) => {
          proc.pending = { resolve, reject };
          proc.child.stdin.write(`${requestBody(this.#tool, params, ctx)}\n`);
        }),
        ctx.signal,
      );
      try {
        return parseReply(line, this.#tool, 'the reply line');
      } catch (err) {
        // After a malformed line the stream cannot be trusted; a reported {"error"} leaves it intact.
        if (err instanceof ToolError && err.code === 'TOOL_MALFORMED_OUTPUT') this.#kill(proc);
        throw err;
      }
    } catch (err) {
      if (ctx.signal.aborted) this.#kill(proc);
      throw err;
    } finally {
      proc.pending = undefined;
      proc.busy = false;
      this.#wake();
    }
  }

  async #acquire(signal: AbortSignal): Promise<Proc> {
    for (;;) {
      if (this.#closed) throw new AgentError('TOOL_CANCELLED', `the process pool of '${this.#tool}' is closed`);
      if (signal.aborted) throw signal.reason;
      let proc = [...this.#procs].find((p) => !p.busy && !p.dead);
      if (!proc && this.#procs.size < this.#size) proc = this.#spawn();
      if (proc) {
        proc.busy = true;
        return proc;
      }
      await raceAbort(new Promise<void>((resolve) => this.#waiting.push(resolve)), signal);
    }
  }

  #spawn(): Proc {
    const [file, ...args] = this.#command as [string, ...string[]];
    const { cwd, env } = this.#options;
    const max = this.#options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    // Its own process group, so that whatever the tool starts dies with it.
    const child = spawn(file, args, { cwd, env: env ? { ...process.env, ...env } : process.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    child.once('exit', trackGroup(child.pid));
    const proc: Proc = { child, partial: [], partialSize: 0, stderr: '', busy: false, dead: false };
    child.stdout.on('data', (c: Buffer) => {
      for (let start = 0; ; ) {
        const nl = c.indexOf(10, start);
        if (nl < 0) {
          proc.partial.push(c.subarray(start));
          proc.partialSize += c.length - start;
          if (proc.partialSize > max) {
            proc.pending?.reject(new ToolError('TOOL_OUTPUT_TOO_LARGE', this.#tool, `'${this.#command.join(' ')}' wrote a reply line longer than ${max} bytes`, {
              hint: 'Return less (a summary, an id to fetch the rest), or raise "max_output_bytes" for this tool in env.json.',
            }));
            proc.pending = undefined;
            this.#kill(proc);
          }
          return;
        }
        const line = Buffer.concat([...proc.partial, c.subarray(start, nl)]).toString('utf8');
        proc.partial = [];
        proc.partialSize = 0;
        start = nl + 1;
        const p = proc.pending;
        proc.pending = undefined;
        if (p) p.resolve(line);
      }
    });
    child.stderr.on('data', (c: Buffer) => (proc.stderr = (proc.stderr + c.toString()).slice(-4_096)));
    child.stdin.on('error', () => {
      // EPIPE after the process died: its 'exit' reports the crash.
    });
    const fail = (why: string, cause?: unknown): void => {
      proc.dead = true;
      this.#procs.delete(proc);
      killGroup(child.pid);
      proc.pending?.reject(new ToolError('TOOL_CRASHED', this.#tool, crashMessage(`'${this.#command.join(' ')}' ${why}`, proc.stderr), { ...(cause ? { cause } : {}) }));
      proc.pending = undefined;
      this.#wake();
    };
    child.on('error', (err) => fail(`could not run (${(err as NodeJS.ErrnoException).code ?? err.message})`, err));
    child.on('exit', (code, sig) => fail(`exited with ${sig ? `signal ${sig}` : `code ${code}`}`));
    this.#procs.add(proc);
    return proc;
  }

  /** Every waiter re-checks for a free process (a waiter whose call was aborted just goes away). */
  #wake(): void {
    for (const w of this.#waiting.splice(0)) w();
  }

  #kill(proc: Proc): void {
    proc.dead = true;
    this.#procs.delete(proc);
    killGroup(proc.child.pid);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#closed = true;
    this.#wake();
    await Promise.all(
      [...this.#procs].map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve();
            p.child.once('exit', () => resolve());
            // Closing stdin is the polite stop; a tool that ignores it is killed, with its group.
            p.child.stdin.end();
            setTimeout(() => killGroup(p.child.pid), 1_000).unref();
          }),
      ),
    );
    this.#procs.clear();
  }
}
