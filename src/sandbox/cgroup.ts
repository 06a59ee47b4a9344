/**
 * Processes and memory of a sandboxed command, bounded by the kernel's pids and memory cgroup
 * controllers. The tools here run as root, where `RLIMIT_NPROC` binds nothing, so a count of
 * processes needs a cgroup: v1 (one hierarchy per controller, as these machines mount them) or v2
 * (the unified hierarchy), whichever is writable. Each sandboxed command gets a cgroup of its own
 * under `agentic-rl-sandbox/`, named `<our pid>-<n>`: one left by a process that died (kill -9)
 * is swept by the next that opens the limiter.
 */
import { existsSync } from 'node:fs';
import { access, constants, mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** How processes and memory are bounded: a cgroup hierarchy, or (none writable) resource limits of an unprivileged uid. */
export type LimitMechanism = 'cgroup-v1' | 'cgroup-v2' | 'uid-rlimit';

/** One command's cgroup. */
export interface CommandCgroup {
  /** The `cgroup.procs` files a process writes its pid into to join, before it starts the command. */
  readonly procs: readonly string[];
  /** Whether the memory controller killed one of its processes for want of memory. */
  oomKilled(): Promise<boolean>;
  /** Every process in it killed (SIGKILL, until none is left), then the cgroup removed. */
  destroy(): Promise<void>;
}

export interface CgroupLimiter {
  readonly mechanism: Exclude<LimitMechanism, 'uid-rlimit'>;
  create(limits: { readonly pids: number; readonly memoryBytes: number }): Promise<CommandCgroup>;
}

const ROOT = '/sys/fs/cgroup';
const PARENT = 'agentic-rl-sandbox';

/** The writable cgroup hierarchy with pids and memory controllers, or undefined (not root, or not mounted). */
export async function openCgroups(root = ROOT): Promise<CgroupLimiter | undefined> {
  const v1 = [path.join(root, 'pids'), path.join(root, 'memory')];
  if (v1.every((d) => existsSync(path.join(d, 'cgroup.procs')))) {
    const parents = v1.map((d) => path.join(d, PARENT));
    if (await writable(parents)) return limiter('cgroup-v1', parents);
  }
  const controllers = await readFile(path.join(root, 'cgroup.controllers'), 'utf8').catch(() => '');
  if (/\bpids\b/.test(controllers) && /\bmemory\b/.test(controllers)) {
    const parent = path.join(root, PARENT);
    try {
      // Children of a v2 cgroup get a controller only when their parent delegates it.
      await writeFile(path.join(root, 'cgroup.subtree_control'), '+pids +memory');
      if (await writable([parent])) {
        await writeFile(path.join(parent, 'cgroup.subtree_control'), '+pids +memory');
        return limiter('cgroup-v2', [parent]);
      }
    } catch {
      // not ours to write: no cgroup limits
    }
  }
  return undefined;
}

async function writable(dirs: readonly string[]): Promise<boolean> {
  try {
    for (const d of dirs) {
      await mkdir(d, { recursive: true });
      await access(path.join(d, 'cgroup.procs'), constants.W_OK);
    }
    return true;
  } catch {
    return false;
  }
}

let created = 0;

function limiter(mechanism: CgroupLimiter['mechanism'], parents: readonly string[]): CgroupLimiter {
  let swept: Promise<void> | undefined;
  return {
    mechanism,
    async create(limits) {
      swept ??= sweepOrphans(parents);
      await swept;
      const name = `${process.pid}-${++created}`;
      const dirs = parents.map((p) => path.join(p, name));
      try {
        for (const d of dirs) await mkdir(d);
        await applyLimits(mechanism, dirs, limits);
      } catch (err) {
        await Promise.all(dirs.map((d) => rmdir(d).catch(() => undefined)));
        throw err;
      }
      return {
        procs: dirs.map((d) => path.join(d, 'cgroup.procs')),
        oomKilled: () => oomKilled(mechanism, dirs),
        destroy: () => destroy(dirs),
      };
    },
  };
}

async function applyLimits(mechanism: CgroupLimiter['mechanism'], dirs: readonly string[], limits: { readonly pids: number; readonly memoryBytes: number }): Promise<void> {
  const bytes = String(limits.memoryBytes);
  if (mechanism === 'cgroup-v2') {
    const [dir] = dirs as [string];
    await writeFile(path.join(dir, 'pids.max'), String(limits.pids));
    await writeFile(path.join(dir, 'memory.max'), bytes);
    // Swap would let memory past the limit without an OOM kill.
    await writeFile(path.join(dir, 'memory.swap.max'), '0').catch(() => undefined);
    return;
  }
  const [pids, memory] = dirs as [string, string];
  await writeFile(path.join(pids, 'pids.max'), String(limits.pids));
  await writeFile(path.join(memory, 'memory.limit_in_bytes'), bytes);
  // With swap accounting on, memory plus swap too (it must not be below the memory limit, hence after it).
  if (existsSync(path.join(memory, 'memory.memsw.limit_in_bytes'))) await writeFile(path.join(memory, 'memory.memsw.limit_in_bytes'), bytes);
}

async function oomKilled(mechanism: CgroupLimiter['mechanism'], dirs: readonly string[]): Promise<boolean> {
  const file = mechanism === 'cgroup-v2' ? path.join(dirs[0] as string, 'memory.events') : path.join(dirs[1] as string, 'memory.oom_control');
  const text = await readFile(file, 'utf8').catch(() => '');
  return Number(/\boom_kill (\d+)/.exec(text)?.[1] ?? 0) > 0;
}

/** Kills what is left in the cgroups (a process forked between two reads is caught by the next) and removes them. */
async function destroy(dirs: readonly string[]): Promise<void> {
  for (let round = 0; round < 200; round++) {
    const pids = new Set<number>();
    for (const d of dirs) {
      const text = await readFile(path.join(d, 'cgroup.procs'), 'utf8').catch(() => '');
      for (const line of text.split('\n')) if (line.trim() !== '') pids.add(Number(line));
    }
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    const removed = await Promise.all(dirs.map((d) => rmdir(d).then(() => true, (err: NodeJS.ErrnoException) => err.code === 'ENOENT')));
    if (removed.every(Boolean)) return;
    // A killed process leaves its cgroup once the kernel has reaped it.
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Cgroups of processes that died without removing theirs (kill -9): emptied and removed. */
async function sweepOrphans(parents: readonly string[]): Promise<void> {
  const names = new Set<string>();
  for (const p of parents) for (const name of await readdir(p).catch(() => [])) if (/^\d+-\d+$/.test(name)) names.add(name);
  for (const name of names) {
    const owner = Number(name.split('-')[0]);
    if (owner === process.pid || alive(owner)) continue;
    await destroy(parents.map((p) => path.join(p, name)));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
