/**
 * An agent program started for one episode: `sh -c <command line>` in its own folder and process
 * group, stdin closed, its environment given. Its exit (code, signal, the tail of its stderr) is
 * what ends the episode it drives; stopping it kills the whole group — SIGTERM, then SIGKILL after
 * a grace period — so a program that ignores SIGTERM or leaves children behind is ended all the
 * same, and a process that dies with us takes its group along (trackGroup).
 */
import { spawn } from 'node:child_process';
import { killGroup } from '../tools/subprocess.js';
import { trackGroup } from '../tools/process-starts.js';

/** How a program ended. */
export interface ProgramExit {
  readonly exit_code: number | null;
  readonly signal: string | null;
  /** The last bytes of its stderr (up to {@link STDERR_TAIL_BYTES}), for the reason an episode failed. */
  readonly stderr_tail: string;
}

export interface ProgramOptions {
  readonly cwd: string;
  /** Added to this process's environment. */
  readonly env: Readonly<Record<string, string>>;
  /** How long a stopped program gets between SIGTERM and SIGKILL (default 2 s). */
  readonly graceMs?: number;
}

/** How much of a program's stderr is kept. */
export const STDERR_TAIL_BYTES = 4_096;

export class Program {
  /** Resolves once the program has exited (its whole group signalled too). */
  readonly exited: Promise<ProgramExit>;
  readonly #pid: number | undefined;
  readonly #graceMs: number;
  #done = false;
  #stopping = false;
  /** Stops waiting for the stderr pipe to close (a process that left the group can hold it open). */
  #giveUp: (afterMs: number) => void = () => undefined;

  private constructor(command: string, options: ProgramOptions) {
    this.#graceMs = options.graceMs ?? 2_000;
    const child = spawn('/bin/sh', ['-c', command], { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    this.#pid = child.pid;
    const untrack = trackGroup(child.pid);
    let tail = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      tail = (tail + chunk).slice(-STDERR_TAIL_BYTES);
    });
    this.exited = new Promise((resolve) => {
      let exit: { code: number | null; signal: string | null } | undefined;
      let late: NodeJS.Timeout | undefined;
      const finish = (): void => {
        if (this.#done) return;
        this.#done = true;
        clearTimeout(late);
        untrack();
        resolve({ exit_code: exit?.code ?? null, signal: exit?.signal ?? null, stderr_tail: tail.trimEnd() });
      };
      child.on('error', (err) => {
        tail += `\n${err.message}`;
        finish();
      });
      this.#giveUp = (afterMs) => {
        clearTimeout(late);
        late = setTimeout(finish, afterMs);
      };
      child.on('exit', (code, signal) => {
        exit = { code, signal };
        // Being stopped, the shell goes at SIGTERM while the program it runs may still be saving its work: the group keeps its grace period.
        if (this.#stopping) return;
        // The leader is gone; what it started may not be, and may hold stderr open: the group goes with it.
        killGroup(child.pid);
        this.#giveUp(1_000);
      });
      child.on('close', finish);
    });
  }

  /** Starts `command` (a shell command line) in `options.cwd`. */
  static start(command: string, options: ProgramOptions): Program {
    return new Program(command, options);
  }

  /** Stops the program and everything it started; resolves once it has exited. */
  async stop(): Promise<ProgramExit> {
    if (!this.#done) {
      this.#stopping = true;
      killGroup(this.#pid, 'SIGTERM');
      const timer = setTimeout(() => {
        killGroup(this.#pid, 'SIGKILL');
        this.#giveUp(1_000);
      }, this.#graceMs);
      try {
        return await this.exited;
      } finally {
        clearTimeout(timer);
        // The program went within its grace period; whatever it started that is still there goes now.
        killGroup(this.#pid);
      }
    }
    return this.exited;
  }
}
