/**
 * The crash test of durable runs: `agent run --store redis://…` as a child process, killed with
 * SIGKILL at random moments and resumed each time with `--resume`, then the run folder checked:
 * every episode finished once, one trajectory line per committed (episode, step) with no gap, and
 * each episode's history (archived from Redis) replaying to the final state the folder records.
 * Used by commands/run-resume.integration.test.ts (a few kills) and scripts/crash-test.ts (25).
 */
import { existsSync } from 'node:fs';
import { cp, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { Redis } from 'ioredis';
import { archiveFile, readArchive } from '../src/state/archive.js';
import { applyPatch } from '../src/state/patch.js';
import type { EpisodeRecord as Episode, TrajectoryRecord as Trajectory } from '../src/replay/run-writer.js';
import { Rng } from '../src/shared/rng.js';
import type { JsonValue } from '../src/shared/json.js';

export interface CrashOptions {
  readonly env: string;
  readonly store: string;
  readonly out: string;
  readonly episodes: number;
  readonly concurrency: number;
  readonly kills: number;
  readonly seed: number;
  /** How long each process runs before its SIGKILL, drawn uniformly (ms after it reported the run started). */
  readonly killAfterMs: readonly [number, number];
  readonly toolOptions?: readonly string[];
  readonly log?: (line: string) => void;
}

export interface CrashReport {
  readonly runId: string;
  readonly kills: number;
  readonly exitCode: number | undefined;
  readonly status: string;
  readonly episodes: number;
  readonly steps: number;
  /** Steps that settled as TOOL_LOST: calls cut off by a kill, of a tool not declared idempotent. */
  readonly lostCalls: number;
  readonly problems: readonly string[];
  readonly keysLeft: number;
}

async function lines<T>(file: string): Promise<T[]> {
  return (await readFile(file, 'utf8'))
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as T);
}

/** Resolves with the run id once the child says the run started (or resumed), or undefined if it exits first. */
function started(child: ResultPromise): Promise<string | undefined> {
  return new Promise((resolve) => {
    let text = '';
    child.stderr?.on('data', (c: Buffer) => {
      text += c.toString();
      const m = /^run (\S+):/m.exec(text);
      if (m) resolve(m[1]);
    });
    void child.then(
      () => resolve(undefined),
      () => resolve(undefined),
    );
  });
}

export async function crashRun(o: CrashOptions): Promise<CrashReport> {
  const rng = new Rng(o.seed);
  const tools = (o.toolOptions ?? []).flatMap((t) => ['--tool-option', t]);
  let args = ['run', o.env, '--episodes', String(o.episodes), '--concurrency', String(o.concurrency), '--store', o.store, '--out', o.out, ...tools];
  let runId: string | undefined;
  let kills = 0;
  let exitCode: number | undefined;
  for (;;) {
    const child = execa('node', ['bin/agent.js', ...args], { reject: false, stdin: 'ignore' });
    const id = await started(child);
    runId ??= id;
    if (id === undefined || kills >= o.kills) {
      const result = await child;
      exitCode = result.exitCode;
      if (result.exitCode !== 0) o.log?.(`the last process exited ${result.exitCode}: ${String(result.stderr).slice(-800)}`);
      break;
    }
    const wait = rng.int(o.killAfterMs[0], o.killAfterMs[1]);
    const ended = await Promise.race([child.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), wait))]);
    if (ended) {
      exitCode = (await child).exitCode;
      break;
    }
    child.kill('SIGKILL');
    await child;
    kills++;
    o.log?.(`kill ${kills}/${o.kills} after ${wait} ms`);
    args = ['run', '--resume', runId as string, '--store', o.store];
  }
  if (runId === undefined) throw new Error('the run never started');
  if (exitCode !== 0) return { runId, kills, exitCode, status: 'failed', episodes: 0, steps: 0, lostCalls: 0, problems: [`the last process exited ${exitCode}`], keysLeft: -1 };
  return { ...(await verify(path.join(o.out, runId), runId, o.store)), runId, kills, exitCode };
}

/** Check a finished durable run's folder (and that Redis kept nothing of it). */
export async function verify(dir: string, runId: string, store: string): Promise<Omit<CrashReport, 'runId' | 'kills' | 'exitCode'>> {
  const problems: string[] = [];
  const summary = JSON.parse(await readFile(path.join(dir, 'summary.json'), 'utf8')) as { status: string; episodes: { requested: number } };
  const episodes = await lines<Episode>(path.join(dir, 'episodes.jsonl'));
  const steps = await lines<Trajectory>(path.join(dir, 'trajectories.jsonl'));
  const states = new Map((await lines<{ state_id: string; state: JsonValue }>(path.join(dir, 'states.jsonl'))).map((s) => [s.state_id, s.state]));
  const byEpisode = new Map<number, Episode>();
  for (const e of episodes) {
    if (byEpisode.has(e.episode)) problems.push(`episode ${e.episode} finished twice`);
    byEpisode.set(e.episode, e);
  }
  for (let i = 0; i < summary.episodes.requested; i++) if (!byEpisode.has(i)) problems.push(`episode ${i} never finished`);
  const stepsOf = new Map<number, Trajectory[]>();
  for (const s of steps) {
    const list = stepsOf.get(s.episode) ?? [];
    list.push(s);
    stepsOf.set(s.episode, list);
  }
  for (const [episode, e] of byEpisode) {
    const list = (stepsOf.get(episode) ?? []).sort((a, b) => a.step - b.step);
    list.forEach((s, i) => {
      if (s.step !== i + 1) problems.push(`episode ${episode}: step ${i + 1} is ${s.step === i ? 'written twice' : 'missing'} (found ${s.step})`);
    });
    if (list.length !== e.steps) problems.push(`episode ${episode}: ${list.length} trajectory lines, its record says ${e.steps} steps`);
    const last = list[list.length - 1];
    if (last && last.state_seq !== e.final_seq) problems.push(`episode ${episode}: last step at seq ${last.state_seq}, final seq ${e.final_seq}`);
    // The history Redis held, archived into the folder as the episode ended, must replay to the final state.
    const initial = states.get(e.initial_state_id);
    if (initial === undefined) {
      problems.push(`episode ${episode}: initial state ${e.initial_state_id} missing from states.jsonl`);
      continue;
    }
    // An episode that never wrote a delta may have no archive; one that did must end at its final seq.
    const archived = existsSync(archiveFile(path.join(dir, 'history'), e.instance_id));
    const history = archived || e.final_seq > 0 ? await readArchive(path.join(dir, 'history'), e.instance_id) : [];
    history.forEach((d, i) => {
      if (d.seq !== i + 1) problems.push(`episode ${episode}: history has seq ${d.seq} at position ${i + 1}`);
    });
    if ((history[history.length - 1]?.seq ?? 0) !== e.final_seq) problems.push(`episode ${episode}: history ends at seq ${history[history.length - 1]?.seq ?? 0}, final seq ${e.final_seq}`);
    const replayed = history.reduce<JsonValue>((state, d) => applyPatch(state, d.patch), initial);
    const recorded = applyPatch(initial, e.final_patch);
    if (JSON.stringify(replayed) !== JSON.stringify(recorded)) problems.push(`episode ${episode}: the state replayed from its history differs from its recorded final state`);
  }
  const redis = new Redis(store, { maxRetriesPerRequest: 1 });
  const keysLeft = (await redis.keys(`agent:${runId}:*`)).length;
  await redis.quit();
  return {
    status: summary.status,
    episodes: episodes.length,
    steps: steps.length,
    lostCalls: steps.filter((s) => s.error?.code === 'TOOL_LOST').length,
    problems,
    keysLeft,
  };
}

/** The weather env with get_weather declared idempotent, in `dir` (its modules stay in the checkout, where they resolve the toolkit). */
export async function idempotentWeather(dir: string): Promise<string> {
  const envDir = path.join(dir, 'weather-idempotent');
  await cp('fixtures/weather', envDir, { recursive: true });
  const home = path.resolve('fixtures/weather');
  const manifest = JSON.parse(await readFile(path.join(envDir, 'env.json'), 'utf8')) as Record<string, unknown>;
  const idempotent = {
    ...manifest,
    module: path.join(home, 'tools.ts'),
    reward_sources: { llm_score: { module: path.join(home, 'judges.ts'), export: 'score' } },
    tools: { get_weather: { idempotent: true } },
  };
  await writeFile(path.join(envDir, 'env.json'), JSON.stringify(idempotent, null, 2));
  return envDir;
}
