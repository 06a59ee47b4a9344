/**
 * Where `agent benchmark` finds a suite: a folder given by path, or a suite shipped with the
 * package by its name (`tau-bench/airline`, `tau2-bench/telecom`: τ-bench's and τ²-bench's tasks,
 * databases and tools, ported), so that an installed toolkit benchmarks without a checkout.
 */
import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { shippedEnvDir } from '../../schema/shipped-envs.js';
import { BENCHMARK_DEFAULTS } from '../../shared/defaults.js';
import { AgentError } from '../../shared/errors.js';
import { suiteManifest } from './suite.js';

/** The suites shipped with the package, by name. */
export const BUILT_IN_SUITES: readonly string[] = ['tau-bench/airline', 'tau-bench/retail', 'tau2-bench/mock', 'tau2-bench/airline', 'tau2-bench/retail', 'tau2-bench/telecom', 'lookup', 'code/python-repair'];

/** A suite `agent benchmark --list` shows: its name, folder, title and number of tasks. */
export interface SuiteListing {
  readonly name: string;
  readonly dir: string;
  readonly title: string;
  /** The split run when none is named, and its task count. */
  readonly split: string;
  readonly tasks: number;
}

function builtInDir(name: string): string | undefined {
  return BUILT_IN_SUITES.includes(name) ? shippedEnvDir(name) : undefined;
}

const isDir = (p: string): boolean => {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
};

/** The folder of suite `spec`: a path to one, or the name of a built-in suite. Says where it looked when neither. */
export function resolveSuite(spec: string): string {
  if (isDir(spec)) return spec;
  const builtIn = builtInDir(spec.replace(/^fixtures\//, ''));
  if (builtIn) return builtIn;
  throw new AgentError('BAD_USAGE', `no suite '${spec}': it is neither a folder (looked at ${path.resolve(spec)}) nor a suite shipped with the toolkit (${BUILT_IN_SUITES.join(', ')})`, {
    hint: 'Pass a suite folder (an env with tasks/<split>.jsonl), or a built-in name: agent benchmark --list.',
  });
}

/** The built-in suites with their titles and task counts (of the split each runs by default). */
export async function listSuites(): Promise<SuiteListing[]> {
  const out: SuiteListing[] = [];
  for (const name of BUILT_IN_SUITES) {
    const dir = builtInDir(name);
    if (!dir) continue;
    const manifest = await suiteManifest(dir);
    const split = manifest.default_split ?? BENCHMARK_DEFAULTS.split;
    const tasks = (await readFile(path.join(dir, 'tasks', `${split}.jsonl`), 'utf8').catch(() => '')).split('\n').filter((l) => l.trim() !== '').length;
    out.push({ name, dir, title: manifest.name ?? name, split, tasks });
  }
  return out;
}
