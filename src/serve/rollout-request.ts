/**
 * A rollouts request as the client sends it (`{"type": "rollouts", "data": {…}}`), checked field by
 * field: bad input is refused naming its JSON pointer (`/data/<field>`) before any episode runs.
 */
import type { ProgramLimits } from '../run/program-episode.js';
import { AgentError } from '../shared/errors.js';
import { isPlainObject } from '../shared/json.js';
import { LLM_DEFAULTS, SERVE_DEFAULTS } from '../shared/defaults.js';

/** A rollout request, as the client sends it (`{"type": "rollouts", "data": {…}}`). */
export interface RolloutRequest {
  /** The tasks: each one group (a fixed list), or the pool `draw` picks from. */
  readonly taskIds: readonly string[];
  /** Groups wanted from the pool `taskIds` (`groups: N`): tasks drawn by the sampler, a filtered or dropped group replaced by another draw. */
  readonly draw?: TaskDraw;
  /** Groups that teach nothing are not sent: all rewards equal, or a mean outside [min, max]. */
  readonly filter: GroupFilter;
  /** Which of a group's turns its staleness counts from: the oldest (every turn within `max_staleness`) or the newest (partial rollouts: a group that ends on the new weights is fresh). */
  readonly stalenessFrom: 'oldest' | 'newest';
  /** An episode with at least this reward is a success in the curriculum's statistics. */
  readonly successReward: number;
  /** Episodes per task: the GRPO group size K. */
  readonly n: number;
  /** The inference server's OpenAI base URL (vLLM-compatible: /tokenize, /v1/completions with token ids). */
  readonly baseURL: string;
  readonly model: string;
  readonly sampling: { readonly temperature: number; readonly top_p: number; readonly max_tokens: number };
  readonly seed: number;
  readonly toolParser?: string;
  readonly maxContext?: number;
  readonly concurrency: number;
  /** The weights' version the trainer pushed last (turns the server does not label carry it). */
  readonly weightVersion?: number;
  readonly maxStaleness?: number;
  readonly stale: 'drop' | 'rerun';
  /** An agent program that runs each episode instead of the suite's `llm:` agent (its argv, joined as a shell command line), and its limits per episode. */
  readonly agent?: { readonly command: string; readonly limits: ProgramLimits };
  /** How long a finished episode's pending rewards are awaited before its group goes without them. */
  readonly rewardWaitMs: number;
}

/** Groups drawn from a pool until `groups` are sent. */
export interface TaskDraw {
  readonly groups: number;
  /** Groups in flight at once: ceil(groups × oversample); the surplus is cancelled once `groups` are sent. */
  readonly oversample: number;
  /** Groups started in all, replacements included: the request ends short after these. */
  readonly maxTries: number;
  readonly sampler: 'uniform' | 'difficulty';
}

export interface GroupFilter {
  readonly zeroVariance: boolean;
  readonly minReward?: number;
  readonly maxReward?: number;
}

/** What checking a request needs of the server. */
export interface RequestBounds {
  /** A served suite's task by id. */
  task(id: string): unknown;
  /** Example task ids, for an error's hint. */
  readonly taskHint: string;
  /** Whether a request may name an agent program to run (`agent serve --allow-agent-programs`): it runs as this server's user. */
  readonly agentPrograms?: boolean;
  /** The inference servers a request may use (`agent serve --llm-base-url`), fixed when the server starts. */
  readonly inferenceUrls: readonly string[];
  /** Episodes a request may run at once: the server's `--max-sessions`. */
  readonly maxConcurrency: number;
}

/** A request's inference server: one of those the server was started with (the first when it names none), never one a client chooses. */
function inferenceServer(given: unknown, allowed: readonly string[], bad: (field: string, want: string, hint?: string) => never): string {
  const hint = 'Start agent serve with --llm-base-url <url> for each inference server its rollouts may use (a request then names one as base_url, or gets the first).';
  const first = allowed[0];
  if (first === undefined) return bad('base_url', 'cannot be served: this server was started with no inference server to call', hint);
  if (given === undefined || given === null) return first;
  const norm = (u: string): string => u.replace(/\/+$/, '');
  if (typeof given !== 'string' || given === '') return bad('base_url', 'must be a non-empty string (or left out for the first of the server\'s)');
  const found = allowed.find((u) => norm(u) === norm(given));
  return found ?? bad('base_url', `'${given}' is not an inference server this server may call (it may call ${allowed.map((u) => `'${u}'`).join(', ')})`, hint);
}

/** The request's fields, checked: a typed error naming the field (`/data/<field>`) otherwise. */
export function parseRolloutRequest(raw: unknown, host: RequestBounds): RolloutRequest {
  const bad = (field: string, want: string, hint?: string): never => {
    throw new AgentError('PARAMS_INVALID', `rollouts /data/${field} ${want}`, { hint: hint ?? 'Send {"type": "rollouts", "data": {"task_ids": [...], "n": 4, "base_url": "http://127.0.0.1:8000/v1", "model": "<served model>", "sampling": {"temperature": 1}}}.' });
  };
  if (!isPlainObject(raw)) return bad('', 'must be an object');
  const ids = raw['task_ids'];
  if (!Array.isArray(ids) || ids.length === 0 || !ids.every((id) => typeof id === 'string')) return bad('task_ids', 'must be a non-empty array of task ids');
  if (ids.length > SERVE_DEFAULTS.maxRolloutTasks) bad('task_ids', `has ${ids.length} tasks: at most ${SERVE_DEFAULTS.maxRolloutTasks} a request`, 'Ask for them in several requests.');
  ids.forEach((id, i) => {
    if (!host.task(id as string)) bad(`task_ids/${i}`, `names no task of this suite ('${String(id)}')`, `GET /tasks lists them (ids look like '${host.taskHint}').`);
  });
  const n = raw['n'];
  if (!Number.isInteger(n) || (n as number) < 1 || (n as number) > SERVE_DEFAULTS.maxGroupSize) bad('n', `must be a whole number from 1 to ${SERVE_DEFAULTS.maxGroupSize} (got ${JSON.stringify(n)})`, 'n is the group size K: episodes per task.');
  const str = (field: string): string => {
    const v = raw[field];
    return typeof v === 'string' && v !== '' ? v : bad(field, 'must be a non-empty string');
  };
  const sampling = raw['sampling'] ?? {};
  if (!isPlainObject(sampling)) return bad('sampling', 'must be an object {temperature?, top_p?, max_tokens?}');
  const num = (o: Record<string, unknown>, field: string, pointer: string, fallback: number, ok: (v: number) => boolean, want: string): number => {
    const v = o[field];
    if (v === undefined || v === null) return fallback;
    return typeof v === 'number' && ok(v) ? v : bad(pointer, want);
  };
  const whole = (v: number): boolean => Number.isInteger(v);
  const opt = (field: string, ok: (v: number) => boolean, want: string): number | undefined => (raw[field] === undefined || raw[field] === null ? undefined : num(raw, field, field, 0, ok, want));
  const stale = raw['stale'] ?? 'rerun';
  if (stale !== 'drop' && stale !== 'rerun') bad('stale', `must be "drop" or "rerun" (got ${JSON.stringify(stale)})`);
  const toolParser = raw['tool_parser'];
  if (toolParser !== undefined && typeof toolParser !== 'string') bad('tool_parser', 'must be a string (hermes, llama3_json)');
  const maxContext = opt('max_context', (v) => whole(v) && v > 0, 'must be a whole number > 0');
  const weightVersion = opt('weight_version', (v) => whole(v) && v >= 0, 'must be a whole number ≥ 0');
  const maxStaleness = opt('max_staleness', (v) => whole(v) && v >= 0, 'must be a whole number ≥ 0');
  const draw = taskDraw(raw, bad);
  // Episodes the request may start: every group of a fixed list, or every try of a drawn one.
  const groupsAtMost = draw ? draw.maxTries : ids.length;
  if ((n as number) * groupsAtMost > SERVE_DEFAULTS.maxRolloutEpisodes) bad(draw ? 'max_tries' : 'n', `× n (${n as number}) is ${(n as number) * groupsAtMost} episodes: at most ${SERVE_DEFAULTS.maxRolloutEpisodes} a request`, draw ? 'Ask for fewer groups, or lower max_tries.' : 'Ask for fewer tasks at once.');
  const filterName = raw['filter'] ?? 'none';
  if (filterName !== 'none' && filterName !== 'zero_variance') bad('filter', `must be "zero_variance" or "none" (got ${JSON.stringify(filterName)})`, '"zero_variance" leaves out a group whose rewards are all equal: GRPO learns nothing from it.');
  const minReward = opt('min_reward', Number.isFinite, 'must be a number');
  const maxReward = opt('max_reward', Number.isFinite, 'must be a number');
  if (minReward !== undefined && maxReward !== undefined && minReward > maxReward) bad('max_reward', `(${maxReward}) is below min_reward (${minReward}): no group could be sent`);
  const stalenessFrom = raw['staleness_from'] ?? 'oldest';
  if (stalenessFrom !== 'oldest' && stalenessFrom !== 'newest') bad('staleness_from', `must be "oldest" or "newest" (got ${JSON.stringify(stalenessFrom)})`, 'A group\'s staleness counts from its oldest turn (the default), or from its newest (turns made on older weights are then allowed: partial rollouts).');
  const agent = raw['agent'];
  if (agent !== undefined && !host.agentPrograms) bad('agent', 'names an agent program, which this server does not run', 'A program runs as the server\'s user: start agent serve with --allow-agent-programs to let its clients name one.');
  const argv = isPlainObject(agent) ? agent['command'] : undefined;
  if (agent !== undefined && !(Array.isArray(argv) && argv.length > 0 && argv.every((a) => typeof a === 'string' && a !== ''))) bad('agent/command', 'must be a non-empty array of strings (the program and its arguments)', 'Send "agent": {"command": ["python3", "my_agent.py"]}.');
  const limits: ProgramLimits = isPlainObject(agent)
    ? {
        ...(agent['max_turns'] !== undefined ? { maxTurns: num(agent, 'max_turns', 'agent/max_turns', 0, (v) => whole(v) && v >= 1, 'must be a whole number ≥ 1') } : {}),
        ...(agent['timeout_s'] !== undefined ? { timeoutMs: num(agent, 'timeout_s', 'agent/timeout_s', 0, (v) => v > 0, 'must be a number of seconds > 0') * 1000 } : {}),
      }
    : {};
  return {
    taskIds: ids as string[],
    ...(draw ? { draw } : {}),
    filter: { zeroVariance: filterName === 'zero_variance', ...(minReward !== undefined ? { minReward } : {}), ...(maxReward !== undefined ? { maxReward } : {}) },
    stalenessFrom: stalenessFrom as 'oldest' | 'newest',
    successReward: num(raw, 'success_reward', 'success_reward', 1, Number.isFinite, 'must be a number'),
    n: n as number,
    baseURL: inferenceServer(raw['base_url'], host.inferenceUrls, bad),
    model: str('model'),
    sampling: {
      temperature: num(sampling, 'temperature', 'sampling/temperature', LLM_DEFAULTS.tokensTemperature, (v) => v >= 0, 'must be a number ≥ 0'),
      top_p: num(sampling, 'top_p', 'sampling/top_p', LLM_DEFAULTS.topP, (v) => v > 0 && v <= 1, 'must be a number in (0, 1]'),
      max_tokens: num(sampling, 'max_tokens', 'sampling/max_tokens', LLM_DEFAULTS.maxTokens, (v) => whole(v) && v >= 1, 'must be a whole number ≥ 1'),
    },
    seed: num(raw, 'seed', 'seed', 0, whole, 'must be a whole number'),
    ...(typeof toolParser === 'string' ? { toolParser } : {}),
    ...(maxContext !== undefined ? { maxContext } : {}),
    concurrency: num(raw, 'concurrency', 'concurrency', Math.min(SERVE_DEFAULTS.rolloutConcurrency, host.maxConcurrency), (v) => whole(v) && v >= 1 && v <= host.maxConcurrency, `must be a whole number from 1 to ${host.maxConcurrency} (the server's --max-sessions)`),
    ...(weightVersion !== undefined ? { weightVersion } : {}),
    ...(maxStaleness !== undefined ? { maxStaleness } : {}),
    stale: stale as 'drop' | 'rerun',
    rewardWaitMs: num(raw, 'reward_wait_s', 'reward_wait_s', SERVE_DEFAULTS.rewardWaitMs / 1000, (v) => v > 0 && v <= 86_400, 'must be a number of seconds in (0, 86400]') * 1000,
    ...(Array.isArray(argv) ? { agent: { command: (argv as string[]).map(shellQuote).join(' '), limits } } : {}),
  };
}

/** `groups`, `oversample`, `max_tries` and `sampler`: a request that draws its tasks from a pool, or undefined for a fixed list. */
function taskDraw(raw: Record<string, unknown>, bad: (field: string, want: string, hint?: string) => never): TaskDraw | undefined {
  const groups = raw['groups'];
  const drawOnly = ['oversample', 'max_tries', 'sampler'].find((f) => raw[f] !== undefined && raw[f] !== null);
  if (groups === undefined || groups === null) return drawOnly === undefined ? undefined : bad(drawOnly, 'applies to a request that draws its tasks: send "groups": N with it', 'With "groups": N, task_ids is the pool the groups\' tasks are drawn from.');
  if (!Number.isInteger(groups) || (groups as number) < 1 || (groups as number) > SERVE_DEFAULTS.maxRolloutTasks) bad('groups', `must be a whole number from 1 to ${SERVE_DEFAULTS.maxRolloutTasks} (got ${JSON.stringify(groups)})`);
  const g = groups as number;
  const oversample = raw['oversample'] ?? 1;
  if (typeof oversample !== 'number' || !(oversample >= 1 && oversample <= SERVE_DEFAULTS.maxOversample)) bad('oversample', `must be a number from 1 to ${SERVE_DEFAULTS.maxOversample} (got ${JSON.stringify(oversample)})`, 'oversample 1.5 runs half as many groups again at once, and cancels the surplus once enough are in.');
  const width = Math.ceil(g * (oversample as number));
  const maxTries = raw['max_tries'] ?? Math.max(width, g * SERVE_DEFAULTS.triesPerGroup);
  if (!Number.isInteger(maxTries) || (maxTries as number) < width) bad('max_tries', `must be a whole number ≥ ${width} (groups × oversample) (got ${JSON.stringify(maxTries)})`);
  const sampler = raw['sampler'] ?? 'uniform';
  if (sampler !== 'uniform' && sampler !== 'difficulty') bad('sampler', `must be "uniform" or "difficulty" (got ${JSON.stringify(sampler)})`, '"difficulty" favours the pool\'s tasks whose recent success is neither 0 nor 1 (the server\'s curriculum.json).');
  return { groups: g, oversample: oversample as number, maxTries: maxTries as number, sampler: sampler as TaskDraw['sampler'] };
}

/** An argument as `sh` reads it back unchanged. */
function shellQuote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

