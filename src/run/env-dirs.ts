/**
 * Where a worker finds a run's env on its own machine: `agent worker --envs DIR…` names folders
 * that are envs or hold envs one level down; the env is the one whose manifest has the run's name.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

import { AgentError, UsageError } from '../shared/errors.js';
import { envFingerprint } from './env-fingerprint.js';

/** What a worker is told of a run's env: its name, the coordinator's folder, and its fingerprint. */
export interface RunEnvRef {
  readonly runId: string;
  readonly env: string;
  readonly envDir: string;
  readonly fingerprint?: string;
}

/**
 * A run's env on this machine: found by name under `envs` (`agent worker --envs`), else at the
 * coordinator's path; refused (ENV_MISMATCH) when it is not the version the run was started with.
 */
export async function runEnvDir(ref: RunEnvRef, envs: readonly string[] | undefined, signal?: AbortSignal): Promise<string> {
  const dir = envs && envs.length > 0 ? await findEnvDir(ref.env, envs, signal) : ref.envDir;
  if (ref.fingerprint === undefined) return dir;
  const here = await envFingerprint(dir);
  if (here !== ref.fingerprint) {
    throw new AgentError('ENV_MISMATCH', `the env '${ref.env}' at ${dir} is not the one run ${ref.runId} was started with: fingerprint ${here} here, ${ref.fingerprint} on the coordinator (${ref.envDir})`, {
      hint: 'Deploy the env version the run was started with to this worker (or point --envs at it); its episodes are handed back for a worker that has it.',
    });
  }
  return dir;
}

export async function findEnvDir(name: string, dirs: readonly string[], signal?: AbortSignal): Promise<string> {
  const looked: string[] = [];
  for (const dir of dirs) {
    const candidates = [dir, ...(await readdir(dir, { withFileTypes: true }).catch(() => [])).filter((d) => d.isDirectory()).map((d) => path.join(dir, d.name))];
    for (const candidate of candidates) {
      signal?.throwIfAborted();
      looked.push(candidate);
      if ((await envName(candidate)) === name) return path.resolve(candidate);
    }
  }
  throw new UsageError(`no env named '${name}' under ${dirs.join(', ')} (looked at ${looked.length} folder(s))`, `Pass --envs a folder holding the env '${name}' (its env.json names it), or copy the env to this machine.`);
}

/** The name in a folder's env.json, or the folder's own name for an env of bare schema files. */
async function envName(dir: string): Promise<string | undefined> {
  try {
    const manifest = JSON.parse(await readFile(path.join(dir, 'env.json'), 'utf8')) as { name?: unknown };
    return typeof manifest.name === 'string' ? manifest.name : path.basename(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return undefined;
  }
  const files = await readdir(dir).catch(() => [] as string[]);
  return files.includes('state_schema.json') ? path.basename(dir) : undefined;
}
