/**
 * The envs shipped with the package, by name: `weather` (the quick start's), `signal-game` (the
 * training example's), `lookup` (the token-rollouts and train-loop pages' suite) and the ported τ-bench suites `tau-bench/airline` and `tau-bench/retail`.
 * Every command and `AgentEnv.open` take one of these names where they take an env folder, so an
 * installed toolkit runs, serves, fuzzes and benchmarks without a checkout. A folder that exists
 * always wins over a name (`fixtures/weather` in a checkout is that folder).
 */
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** This file is src/schema/ in a checkout and dist/src/schema/ when built; fixtures/ sits at the package root. */
const FIXTURES = ['../../fixtures/', '../../../fixtures/'].map((rel) => new URL(rel, import.meta.url)).find((u) => existsSync(u));

/** The env names the package ships, for messages and listings. */
export const SHIPPED_ENVS: readonly string[] = ['weather', 'signal-game', 'lookup', 'tau-bench/airline', 'tau-bench/retail', 'tau2-bench/mock', 'tau2-bench/airline', 'tau2-bench/retail', 'tau2-bench/telecom', 'code/python-repair'];

const isDir = (p: string): boolean => {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
};

/** The folder of a shipped env by its name (`weather`, or `fixtures/weather` as the repository spells it), if the package has it. */
export function shippedEnvDir(spec: string): string | undefined {
  const name = spec.replace(/^(\.\/)?fixtures\//, '').replace(/\/+$/, '');
  if (!FIXTURES || !SHIPPED_ENVS.includes(name)) return undefined;
  const dir = path.join(fileURLToPath(FIXTURES), name);
  return isDir(dir) ? dir : undefined;
}

/** An env folder as given, or the shipped env of that name when no such folder exists. */
export function resolveEnvDir(spec: string): string {
  if (isDir(spec)) return path.resolve(spec);
  return shippedEnvDir(spec) ?? path.resolve(spec);
}
