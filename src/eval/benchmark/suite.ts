/**
 * A benchmark suite: an env folder with task files `tasks/<split>.jsonl`, and optionally
 * `suite.json` ({name, env, error_observation, instructions}: `"user_scenario"` when each task's
 * instruction is a simulated user's private scenario, as τ-bench's are, not a user's request). Each task line:
 *   {id, instruction, user_id?, initial_state? | initial_patch?, actions: [{name, params}], outputs?, success?, criteria?}
 * `success` is `"state_match"` (the default: the final state equals the gold actions' replayed on a
 * fresh copy, and each output appears in what the agent said), `{"reward_at_least": r}`, or
 * `{"module": "checks.ts", "export": "name"}` (a function of the episode's outcome → boolean, or
 * `{success, components?, not_scored?, details?}`); `criteria` is any JSON that check reads (τ²'s
 * evaluation criteria).
 * Bad lines are a typed error naming the file, line and JSON pointer; nothing runs.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { decodeUtf8, readUtf8 } from '../../shared/utf8.js';
import path from 'node:path';
import { AgentError, ValidationError, type Issue } from '../../shared/errors.js';
import { isPlainObject, jsonCopy, type JsonObject, type JsonValue } from '../../shared/json.js';
import { applyPatch, type Patch } from '../../state/patch.js';
import type { PolicyTask } from '../../run/policy.js';
import { readChatTurns, type ChatTurn } from '../../llm/chat-turns.js';
import { BENCHMARK_DEFAULTS } from '../../shared/defaults.js';

/** How a task's episode is judged a success: its final state matches the gold one, its reward reaches a value, or a module decides. */
export type SuccessCriterion = { readonly kind: 'state_match' } | { readonly kind: 'reward_at_least'; readonly value: number } | { readonly kind: 'module'; readonly module: string; readonly exportName: string };

/** One task of a suite: id, instruction, initial state, gold actions and outputs, and how success is judged. */
export interface BenchmarkTask {
  readonly id: string;
  readonly instruction: string;
  readonly userId?: string;
  /** The state the episode starts from: the env's base state, the task's own, or the base with the task's patch. */
  readonly initialState: JsonValue;
  /** The gold actions; `actor: 'user'` marks the user's own (τ²-bench telecom's phone). */
  readonly actions: readonly { readonly name: string; readonly params: JsonObject; readonly actor?: 'user' }[];
  readonly outputs: readonly string[];
  readonly success: SuccessCriterion;
  /** What a module check reads beside the gold actions: the task's own scoring data (τ²-bench's evaluation criteria). */
  readonly criteria?: JsonValue;
  /** The conversation before the episode starts, in OpenAI's chat shape (τ²-bench's `message_history`): the agent goes on from it. */
  readonly history?: readonly ChatTurn[];
}

/** The task as its episode's policy sees it (`obs.task`). */
export function policyTask(task: BenchmarkTask): PolicyTask {
  return { id: task.id, instruction: task.instruction, ...(task.userId ? { user_id: task.userId } : {}), ...(task.history ? { history: task.history } : {}) };
}

/** A benchmark suite loaded from its folder: its name, folder, env folder, split and tasks. */
export interface Suite {
  readonly name: string;
  readonly dir: string;
  /** The env folder (the suite folder unless suite.json says otherwise). */
  readonly envDir: string;
  readonly split: string;
  readonly tasks: readonly BenchmarkTask[];
  /** Observations that mean the call failed, for envs whose tools answer errors as text (tau-bench's `Error: …`). */
  readonly errorObservation?: RegExp;
}

interface SuiteManifest {
  readonly name?: string;
  readonly env?: string;
  readonly error_observation?: string;
  /** `request` (default) or `user_scenario`: read by the chat export, which marks such a user message. */
  readonly instructions?: 'request' | 'user_scenario';
  /** The split run when none is named (default `test`): τ²'s mock domain has only `base`. */
  readonly default_split?: string;
}

/** A suite's suite.json, or nothing. */
export async function suiteManifest(dir: string): Promise<SuiteManifest> {
  const file = path.join(path.resolve(dir), 'suite.json');
  return existsSync(file) ? (JSON.parse(await readUtf8(file, path.relative(process.cwd(), file))) as SuiteManifest) : {};
}

/**
 * Load a suite's split (undefined: its suite.json's `default_split`, else `test`), with every task
 * checked (ids unique, actions and params shaped right). `base` is the env's initial state.
 */
export async function loadSuite(dir: string, splitName: string | undefined, base: JsonValue, options: { readonly only?: readonly string[] } = {}): Promise<Suite> {
  const root = path.resolve(dir);
  const manifest = await suiteManifest(root);
  const split = splitName ?? manifest.default_split ?? BENCHMARK_DEFAULTS.split;
  const file = path.join(root, 'tasks', `${split}.jsonl`);
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch {
    const splits = await readdir(path.join(root, 'tasks')).then((names) => names.filter((n) => n.endsWith('.jsonl') && !n.endsWith('.expected.jsonl')).map((n) => n.slice(0, -'.jsonl'.length)).sort(), () => []);
    throw new AgentError('BAD_USAGE', `suite '${dir}' has no split '${split}' (no ${path.relative(process.cwd(), file)})`, { hint: splits.length > 0 ? `Its splits: ${splits.join(', ')}; pass one with --split.` : 'A suite holds its tasks in tasks/<split>.jsonl; pass --split with one that exists.' });
  }
  const issues: Issue[] = [];
  const tasks: BenchmarkTask[] = [];
  const seen = new Set<string>();
  const rel = path.relative(process.cwd(), file);
  const text = decodeUtf8(bytes, rel);
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const at = `${rel}:${i + 1}`;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (err) {
      issues.push({ file: at, pointer: '', message: `not JSON: ${(err as Error).message}` });
      return;
    }
    const id = isPlainObject(raw) ? raw['id'] : undefined;
    if (typeof id === 'string') {
      if (seen.has(id)) issues.push({ file: at, pointer: '/id', message: `duplicate task id '${id}'` });
      seen.add(id);
    }
    const task = parseTask(raw, base, root, (pointer, message) => issues.push({ file: at, pointer, message }));
    if (task) tasks.push(task);
  });
  if (issues.length > 0) throw new ValidationError('DEFINITION_INVALID', `suite '${dir}' split '${split}' has invalid tasks`, issues, 'Fix each listed task; nothing was run.');
  let chosen = tasks;
  if (options.only && options.only.length > 0) {
    const unknown = options.only.filter((id) => !seen.has(id));
    if (unknown.length > 0) throw new AgentError('BAD_USAGE', `no task ${unknown.map((u) => `'${u}'`).join(', ')} in split '${split}'`, { hint: `Task ids look like '${tasks[0]?.id ?? '…'}'.` });
    const wanted = new Set(options.only);
    chosen = tasks.filter((t) => wanted.has(t.id));
  }
  if (chosen.length === 0) throw new AgentError('BAD_USAGE', `split '${split}' of suite '${dir}' has no tasks`, { hint: 'Add task lines to the split file.' });
  return {
    name: manifest.name ?? path.basename(root),
    dir: root,
    envDir: path.resolve(root, manifest.env ?? '.'),
    split,
    tasks: chosen,
    ...(manifest.error_observation ? { errorObservation: new RegExp(manifest.error_observation) } : {}),
  };
}

function parseTask(raw: unknown, base: JsonValue, root: string, bad: (pointer: string, message: string) => void): BenchmarkTask | undefined {
  if (!isPlainObject(raw)) return void bad('', 'a task must be an object {id, instruction, actions, …}');
  let ok = true;
  const fail = (pointer: string, message: string): void => {
    ok = false;
    bad(pointer, message);
  };
  if (typeof raw['id'] !== 'string' || raw['id'] === '') fail('/id', 'must be a non-empty string');
  if (typeof raw['instruction'] !== 'string') fail('/instruction', 'must be a string (what the user wants)');
  if (raw['user_id'] !== undefined && typeof raw['user_id'] !== 'string') fail('/user_id', 'must be a string');
  const actions = raw['actions'] ?? [];
  if (!Array.isArray(actions)) fail('/actions', 'must be an array of {name, params}');
  else {
    actions.forEach((a, i) => {
      if (!isPlainObject(a) || typeof a['name'] !== 'string') fail(`/actions/${i}`, 'must be {name: string, params: object}');
      else if (a['params'] !== undefined && !isPlainObject(a['params'])) fail(`/actions/${i}/params`, 'must be an object');
      else if (a['actor'] !== undefined && a['actor'] !== 'agent' && a['actor'] !== 'user') fail(`/actions/${i}/actor`, 'must be "agent" (the default) or "user"');
    });
  }
  const outputs = raw['outputs'] ?? [];
  if (!Array.isArray(outputs) || outputs.some((o) => typeof o !== 'string')) fail('/outputs', 'must be an array of strings');
  let initialState = base;
  if (raw['initial_state'] !== undefined) initialState = raw['initial_state'] as JsonValue;
  else if (raw['initial_patch'] !== undefined) {
    try {
      initialState = applyPatch(base, raw['initial_patch'] as Patch);
    } catch (err) {
      fail('/initial_patch', `does not apply to the env's initial state: ${(err as Error).message}`);
    }
  }
  const success = criterion(raw['success'], root, fail);
  const history = raw['history'] === undefined ? undefined : readChatTurns(raw['history'], '/history', fail);
  if (!ok || !success) return undefined;
  return {
    id: raw['id'] as string,
    instruction: raw['instruction'] as string,
    ...(typeof raw['user_id'] === 'string' ? { userId: raw['user_id'] } : {}),
    // Tasks that share the base state share one frozen copy (one state in the run folder, validated once).
    initialState: initialState === base ? base : jsonCopy(initialState),
    actions: (actions as JsonObject[]).map((a) => ({ name: a['name'] as string, params: (a['params'] ?? {}) as JsonObject, ...(a['actor'] === 'user' ? { actor: 'user' as const } : {}) })),
    outputs: outputs as string[],
    success,
    ...(raw['criteria'] !== undefined ? { criteria: raw['criteria'] as JsonValue } : {}),
    ...(history && history.length > 0 ? { history } : {}),
  };
}

function criterion(raw: unknown, root: string, fail: (pointer: string, message: string) => void): SuccessCriterion | undefined {
  if (raw === undefined || raw === 'state_match') return { kind: 'state_match' };
  if (isPlainObject(raw) && typeof raw['reward_at_least'] === 'number') return { kind: 'reward_at_least', value: raw['reward_at_least'] };
  if (isPlainObject(raw) && typeof raw['module'] === 'string') return { kind: 'module', module: path.resolve(root, raw['module']), exportName: typeof raw['export'] === 'string' ? raw['export'] : 'default' };
  fail('/success', 'must be "state_match", {"reward_at_least": number} or {"module": "checks.ts", "export": "name"}');
  return undefined;
}
