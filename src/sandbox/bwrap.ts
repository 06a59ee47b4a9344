/**
 * The bubblewrap command line of a sandboxed command: a read-only view of the system folders a
 * program needs (`/usr` and what links into it, a few files of `/etc` that hold no secrets) and
 * nothing else of the host — no home, no project folder, no host `/proc`, no `/sys` — a writable
 * `/workspace` (the command's folder) and `/tmp`, every namespace of its own (no network: its own
 * network namespace holds only a loopback), an unprivileged uid, no capabilities, a new session
 * (no terminal to inject into), and death with its parent: if the process that started it dies,
 * even by SIGKILL, the sandbox and everything in it die too.
 */
import { execFile } from 'node:child_process';
import { lstatSync, mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AgentError } from '../shared/errors.js';

/** The uid and gid the command runs as inside (nobody). */
export const SANDBOX_UID = 65_534;

/** System folders, bound read-only (or as the links they are on merged-/usr systems). */
const SYSTEM = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
/** Files of /etc a program reads to start (the loader's cache, time zone, TLS roots): none holds a secret. */
const ETC = ['/etc/ld.so.cache', '/etc/ld.so.conf', '/etc/ld.so.conf.d', '/etc/alternatives', '/etc/localtime', '/etc/ssl/certs', '/etc/ca-certificates', '/etc/mime.types'];

/**
 * `shareNet`: keep the network namespace bwrap starts in (one made for the sandbox, with only its
 * forwarder: egress.ts). `readOnly`: host folders it sees read-only at their own paths.
 */
export function bwrapArgs(workspace: string, env: Readonly<Record<string, string>>, options: { readonly shareNet?: boolean; readonly readOnly?: readonly string[] } = {}): string[] {
  const args = ['--unshare-all', ...(options.shareNet ? ['--share-net'] : []), '--die-with-parent', '--new-session', '--cap-drop', 'ALL', '--uid', String(SANDBOX_UID), '--gid', String(SANDBOX_UID), '--hostname', 'sandbox', '--clearenv'];
  for (const dir of SYSTEM) {
    const link = linkOf(dir);
    if (link !== undefined) args.push('--symlink', link, dir);
    else args.push('--ro-bind-try', dir, dir);
  }
  for (const file of ETC) args.push('--ro-bind-try', file, file);
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--bind', workspace, '/workspace');
  for (const dir of options.readOnly ?? []) args.push('--ro-bind', dir, dir);
  args.push('--chdir', '/workspace', '--remount-ro', '/');
  for (const [k, v] of Object.entries(env)) args.push('--setenv', k, v);
  return args;
}

function linkOf(p: string): string | undefined {
  try {
    return lstatSync(p).isSymbolicLink() ? readlinkSync(p) : undefined;
  } catch {
    return undefined;
  }
}

/** bwrap's version, once it has shown it can make a sandbox here; else SANDBOX_UNAVAILABLE saying what is missing. */
export async function probeBwrap(signal?: AbortSignal): Promise<string> {
  const run = (args: readonly string[]): Promise<{ code: number | string; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      execFile('bwrap', args, { timeout: 10_000, ...(signal ? { signal } : {}) }, (err, stdout, stderr) => resolve({ code: err ? ((err as NodeJS.ErrnoException).code ?? 1) : 0, stdout, stderr }));
    });
  const version = await run(['--version']);
  if (version.code === 'ENOENT') {
    throw new AgentError('SANDBOX_UNAVAILABLE', 'bubblewrap (bwrap) is not on PATH: sandboxed commands cannot run, and none runs unsandboxed', {
      hint: 'Install it: apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap (Fedora), apk add bubblewrap (Alpine). Or, knowing the code then runs as you with your files and network, pass --sandbox unsafe-host.',
    });
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sandbox-probe-'));
  try {
    const trial = await run([...bwrapArgs(dir, {}), '--', 'true']);
    if (trial.code !== 0) {
      throw new AgentError('SANDBOX_UNAVAILABLE', `bwrap cannot make a sandbox here: ${trial.stderr.trim() || `it exited ${trial.code}`}`, {
        hint: 'It needs user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 (Debian) or user.max_user_namespaces > 0; in a container, allow them (e.g. docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined), or run the env on gVisor or one pod per episode (docs: the sandbox page).',
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return version.stdout.trim();
}
