/**
 * Runs commands the way a code-execution tool must: whatever the model wrote, thousands of times
 * an hour, with the machine staying ours. Each command runs inside bubblewrap (bwrap.ts) with its
 * own workspace folder, and under limits:
 *
 * - processes and memory: a cgroup of its own (cgroup.ts), or where none is writable, resource
 *   limits of an unprivileged uid (`mechanism.limits` says which);
 * - CPU seconds and file size: resource limits (`prlimit`), inherited by everything it starts;
 * - output: the first `outputBytes` of stdout and of stderr kept, the rest counted, a marker added;
 * - wall time: past `timeoutMs` the sandbox is killed — its PID namespace goes with its first
 *   process, its cgroup is swept — so children that ignore SIGTERM go too.
 *
 * Nothing runs unsandboxed unless the caller asked for `unsafe-host` by name.
 */
import { execFile, spawn } from 'node:child_process';
import { chown } from 'node:fs/promises';
import { constants } from 'node:os';
import { SANDBOX_DEFAULTS } from '../shared/defaults.js';
import { AgentError } from '../shared/errors.js';
import { bwrapArgs, probeBwrap, SANDBOX_UID } from './bwrap.js';
import { openCgroups, type CgroupLimiter, type CommandCgroup, type LimitMechanism } from './cgroup.js';
import { CappedOutput } from './capped-output.js';
import { EGRESS_ENV, EgressProxy, egressPrefix, LoopbackRelay, type AllowedHost } from './egress.js';

/** What bounds one sandboxed command: CPU seconds, memory, processes, file size, output kept, wall time. */
export interface SandboxLimits {
  readonly cpuSeconds: number;
  readonly memoryMb: number;
  readonly pids: number;
  /** The largest file the command may write. */
  readonly fileSizeMb: number;
  /** Of stdout and of stderr each. */
  readonly outputBytes: number;
  readonly timeoutMs: number;
}

export interface SandboxCommand {
  readonly argv: readonly string[];
  /** The host folder mounted read-write at `/workspace`, the command's working folder. */
  readonly workspace: string;
  readonly limits?: Partial<SandboxLimits>;
  /** The command's whole environment, besides PATH, HOME (/workspace), LANG and TMPDIR. */
  readonly env?: Readonly<Record<string, string>>;
  readonly stdin?: string;
  readonly signal?: AbortSignal;
  /** Ports of the host's loopback the command reaches at the same port inside (an agent program's model endpoint); nothing else of the host. */
  readonly forwardPorts?: readonly number[];
  /** Host folders it sees read-only at their own paths (an agent program's files and interpreter). */
  readonly readOnly?: readonly string[];
  /** Keep the last `outputBytes` of stdout and stderr instead of the first (what a failed program said last). */
  readonly keep?: 'head' | 'tail';
}

/** What a sandboxed command did: a code tool's observation. */
export interface SandboxResult {
  /** Its exit code; null when a signal ended it. */
  readonly exit_code: number | null;
  /** The signal that ended it (SIGKILL at the wall-time or memory limit, SIGXCPU at the CPU limit). */
  readonly signal: string | null;
  readonly timed_out: boolean;
  /** The memory limit's OOM killer ended one of its processes. */
  readonly oom: boolean;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout or stderr was longer than `outputBytes`: its text ends with a marker, the true sizes are below. */
  readonly truncated: boolean;
  readonly stdout_bytes: number;
  readonly stderr_bytes: number;
  readonly duration_ms: number;
}

/** `isolated` (bwrap), or `unsafe-host`: the command runs as this process's user, with its files and network; only the limits hold. */
export type SandboxMode = 'isolated' | 'unsafe-host';

/** How a sandbox isolates and bounds its commands. */
export interface SandboxMechanism {
  readonly mode: SandboxMode;
  /** bwrap's version (isolated mode). */
  readonly bwrap?: string;
  readonly limits: LimitMechanism;
  /** The hosts its commands may reach through its proxy (none: no network at all). */
  readonly allowed_hosts?: readonly string[];
}

export interface SandboxOptions {
  readonly mode?: SandboxMode;
  /** Commands running at once; more wait their turn (default SANDBOX_DEFAULTS.concurrency). */
  readonly concurrency?: number;
  /** Bound processes and memory with resource limits of an unprivileged uid even where cgroups are writable (tests of that path). */
  readonly limits?: 'uid-rlimit';
  /** Hosts the commands may reach, over HTTP(S) through a proxy that admits only them (egress.ts); none by default. */
  readonly allowHosts?: readonly AllowedHost[];
  readonly signal?: AbortSignal;
}

/** Joins the cgroups named first (their count, then their cgroup.procs files), then becomes the command: nothing runs before it is bounded. */
const ENTER = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n - 1)); done; exec "$@"';

/** Signal names by number. */
const SIGNALS = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name]));

export class Sandbox implements AsyncDisposable {
  readonly mechanism: SandboxMechanism;
  readonly #cgroups: CgroupLimiter | undefined;
  readonly #slots: number;
  readonly #egress: EgressProxy | undefined;
  /** How to kill each command running now; closing kills them and waits for them to be gone. */
  readonly #live = new Set<() => void>();
  #idle: (() => void) | undefined;
  #closed = false;
  /** Relays of forwarded ports, by port, made on first use. */
  readonly #relays = new Map<number, Promise<LoopbackRelay>>();
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  private constructor(mechanism: SandboxMechanism, cgroups: CgroupLimiter | undefined, slots: number, egress: EgressProxy | undefined) {
    this.mechanism = mechanism;
    this.#cgroups = cgroups;
    this.#slots = slots;
    this.#egress = egress;
  }

  /** Checks once that sandboxes can be made here (SANDBOX_UNAVAILABLE, saying what is missing, if not) and finds how limits are enforced. */
  static async open(options: SandboxOptions = {}): Promise<Sandbox> {
    const mode = options.mode ?? 'isolated';
    const bwrap = mode === 'isolated' ? await probeBwrap(options.signal) : undefined;
    const cgroups = options.limits === 'uid-rlimit' ? undefined : await openCgroups();
    const limits = cgroups?.mechanism ?? 'uid-rlimit';
    // On the host (unsafe-host) the command has the host's network: a list would promise what nothing enforces.
    const hosts = mode === 'isolated' ? (options.allowHosts ?? []) : [];
    const egress = hosts.length > 0 ? await openEgress(hosts, options.signal) : undefined;
    const allowed = hosts.map((h) => (h.port === undefined ? h.host : `${h.host}:${h.port}`));
    return new Sandbox({ mode, ...(bwrap !== undefined ? { bwrap } : {}), limits, ...(allowed.length > 0 ? { allowed_hosts: allowed } : {}) }, cgroups, options.concurrency ?? SANDBOX_DEFAULTS.concurrency, egress);
  }

  /** Stops its proxy (with allowed hosts); commands still running lose their way out. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.#closed = true;
    // Commands still running (a run interrupted) go first, and are waited for: nothing is left writing into a workspace about to be removed.
    if (this.#live.size > 0) {
      const idle = new Promise<void>((resolve) => (this.#idle = resolve));
      for (const kill of this.#live) kill();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([idle, new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
      clearTimeout(timer);
    }
    const relays = await Promise.allSettled(this.#relays.values());
    this.#relays.clear();
    await Promise.all([this.#egress?.[Symbol.asyncDispose](), ...relays.map((r) => (r.status === 'fulfilled' ? r.value[Symbol.asyncDispose]() : undefined))]);
  }

  /** The relay of a forwarded port, made once a trial shows a network namespace with a forwarder can be made here. */
  #relay(port: number, signal: AbortSignal | undefined): Promise<LoopbackRelay> {
    let relay = this.#relays.get(port);
    if (!relay) {
      relay = (async () => {
        await probeNetns('a forwarded port', signal);
        return LoopbackRelay.open(port);
      })();
      this.#relays.set(port, relay);
      relay.catch(() => this.#relays.delete(port));
    }
    return relay;
  }

  /** Runs `command` to its end, or its limit; throws only when it could not start (or `signal` aborted it: the sandbox is killed first). */
  async run(command: SandboxCommand): Promise<SandboxResult> {
    if (command.argv.length === 0) throw new AgentError('BAD_USAGE', 'a sandboxed command needs a program to run (argv is empty)');
    await this.#slot(command.signal);
    try {
      return await this.#run(command, { ...SANDBOX_DEFAULTS, ...command.limits });
    } finally {
      this.#running--;
      this.#waiting.shift()?.();
    }
  }

  async #slot(signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    if (this.#running < this.#slots) {
      this.#running++;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const take = (): void => {
        signal?.removeEventListener('abort', onAbort);
        this.#running++;
        resolve();
      };
      const onAbort = (): void => {
        this.#waiting.splice(this.#waiting.indexOf(take), 1);
        reject(signal?.reason as Error);
      };
      this.#waiting.push(take);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  async #run(command: SandboxCommand, limits: SandboxLimits): Promise<SandboxResult> {
    const egress = this.#egress;
    const isolated = this.mechanism.mode === 'isolated';
    // Unsafe-host commands have the host's network: nothing to forward.
    const relays = isolated ? await Promise.all((command.forwardPorts ?? []).map((p) => this.#relay(p, command.signal))) : [];
    const routes = [...(egress ? [egress.route] : []), ...relays.map((r) => r.route)];
    const env = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/workspace', LANG: 'C.UTF-8', TMPDIR: '/tmp', ...(egress ? EGRESS_ENV : {}), ...command.env };
    const cgroup: CommandCgroup | undefined = await this.#cgroups?.create({ pids: limits.pids, memoryBytes: limits.memoryMb * 1024 * 1024 });
    const rlimits = [`--cpu=${limits.cpuSeconds}:${limits.cpuSeconds + 1}`, `--fsize=${limits.fileSizeMb * 1024 * 1024}`, '--core=0'];
    const drop: string[] = [];
    if (cgroup === undefined) {
      // No cgroup: an unprivileged uid's own process count and address space bound it (as root they would bind nothing).
      rlimits.push(`--nproc=${limits.pids}`, `--as=${limits.memoryMb * 1024 * 1024}`);
      if (process.getuid?.() === 0) {
        drop.push('setpriv', `--reuid=${SANDBOX_UID}`, `--regid=${SANDBOX_UID}`, '--clear-groups', '--');
        await chown(command.workspace, SANDBOX_UID, SANDBOX_UID);
      }
    }
    const inner = isolated ? ['bwrap', ...bwrapArgs(command.workspace, env, { shareNet: routes.length > 0, readOnly: command.readOnly ?? [] }), '--', ...command.argv] : [...command.argv];
    const procs = cgroup?.procs ?? [];
    // With allowed hosts, a network namespace of the sandbox's own and the forwarder into it come first, outside the limits.
    const [program = '/bin/sh', ...args] = [...(routes.length > 0 ? egressPrefix(routes) : []), '/bin/sh', '-c', ENTER, 'sandbox', String(procs.length), ...procs, 'prlimit', ...rlimits, '--', ...drop, ...inner];
    const t0 = performance.now();
    const child = spawn(program, args, {
      cwd: command.workspace,
      env: isolated ? { PATH: HOST_PATH } : env,
      stdio: [command.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      detached: true,
    });
    const stdout = new CappedOutput(limits.outputBytes, command.keep);
    const stderr = new CappedOutput(limits.outputBytes, command.keep);
    child.stdout?.on('data', (b: Buffer) => stdout.push(b));
    child.stderr?.on('data', (b: Buffer) => stderr.push(b));
    child.stdin?.on('error', () => undefined).end(command.stdin);
    let timedOut = false;
    const kill = (): void => {
      // The sandbox's first process: with it go its PID namespace and all in it; the cgroup sweep catches the rest.
      if (child.pid !== undefined) killQuietly(-child.pid);
      void cgroup?.destroy();
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, limits.timeoutMs);
    command.signal?.addEventListener('abort', kill, { once: true });
    this.#live.add(kill);
    // Aborted (or the sandbox closed) while it was being set up: it must not run to its time limit.
    if (command.signal?.aborted || this.#closed) kill();
    try {
      const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
        child.once('error', reject);
        child.once('close', (c, s) => resolve([c, s]));
      });
      command.signal?.throwIfAborted();
      const oom = (await cgroup?.oomKilled()) ?? false;
      // bwrap reports a command a signal ended as 128 + the signal, as shells do.
      const bySignal = signal !== null ? signal : isolated && code !== null && code > 128 && code < 160 ? (SIGNALS.get(code - 128) ?? `SIG${code - 128}`) : null;
      return {
        exit_code: bySignal !== null ? null : code,
        signal: bySignal,
        timed_out: timedOut,
        oom,
        stdout: stdout.text(),
        stderr: stderr.text(),
        truncated: stdout.truncated || stderr.truncated,
        stdout_bytes: stdout.bytes,
        stderr_bytes: stderr.bytes,
        duration_ms: Math.round((performance.now() - t0) * 10) / 10,
      };
    } finally {
      clearTimeout(timer);
      command.signal?.removeEventListener('abort', kill);
      if (child.pid !== undefined) killQuietly(-child.pid);
      await cgroup?.destroy();
      this.#live.delete(kill);
      if (this.#live.size === 0) this.#idle?.();
    }
  }
}

/** How long closing a sandbox waits for the commands it killed to be gone. */
const CLOSE_WAIT_MS = 5_000;

/** The host's PATH for the programs that set a sandbox up (bwrap, prlimit, unshare, ip: some live in sbin). */
const HOST_PATH = `${process.env['PATH'] ?? '/usr/bin:/bin'}:/usr/sbin:/sbin`;

/** The proxy to the allowed hosts, once a trial shows a network namespace with a forwarder can be made here. */
async function openEgress(hosts: readonly AllowedHost[], signal: AbortSignal | undefined): Promise<EgressProxy> {
  await probeNetns('allowed hosts', signal);
  return EgressProxy.open(hosts);
}

/** Whether a network namespace of the sandbox's own, with the forwarder in it, can be made here: checked once per process. */
let netns: Promise<string | undefined> | undefined;

async function probeNetns(what: string, signal: AbortSignal | undefined): Promise<void> {
  netns ??= new Promise((resolve) => {
    const [program = 'unshare', ...args] = [...egressPrefix([]), 'true'];
    execFile(program, args, { timeout: 10_000, env: { PATH: HOST_PATH } }, (err, _out, stderr) => resolve(err ? stderr.trim() || err.message : undefined));
  });
  signal?.throwIfAborted();
  const failure = await netns;
  if (failure !== undefined) {
    throw new AgentError('SANDBOX_UNAVAILABLE', `${what} need a network namespace of the sandbox's own, and one cannot be made here: ${failure}`, {
      hint: 'It takes unshare (util-linux) and ip (iproute2) on PATH, and root or unprivileged user namespaces. Without them a sandbox has no network at all and needs neither.',
    });
  }
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}
