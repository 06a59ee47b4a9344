/**
 * `agent export --format tokens`: one record per episode of a token-mode run (`--tokens`), the
 * shape verl's and TRL's trainers take: the whole sequence as the inference server saw it
 * (`input_ids`, first prompt first), a `loss_mask` that is 1 exactly on the ids the model generated,
 * the sampler's `logprobs` on those (null elsewhere), and each generated turn's span with the
 * reward that landed on the steps it chose (delayed rewards included, as the ledger has them now;
 * a benchmark's verdict on the last turn). Built from the `llm_call` events, whose ids are the
 * server's own: nothing is re-tokenized.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { TokenTurn } from '../events/env-events.js';
import type { LlmRunConfig } from '../events/run-events.js';
import { AgentError } from '../shared/errors.js';
import { exportSteps, readVerdicts, verdictReader, type ExportOptions, type ExportRecord } from './export.js';
import { list, scalar, struct, writeNestedParquet, type Field } from './parquet-schema.js';
import { forEachLine, RecordReading } from './run-rewards.js';
import { RUN_FILES, type EpisodeRecord } from './run-writer.js';

/** A generated turn's span of `input_ids` (`start` inclusive, `end` exclusive), and its reward. */
export interface TokenSpan {
  readonly start: number;
  readonly end: number;
  /** Σ of the rewards of the steps the turn chose (its tool calls), a benchmark's verdict on the last turn. */
  readonly reward: number;
  readonly finish_reason: string;
  /** The first step the turn chose, when it chose any (a turn refused or read as no call chose none). */
  readonly step?: number;
  /** Why the turn's text holds a call the tool parser cannot read. */
  readonly invalid?: string;
  /** The weights' version the turn was generated with, when known. */
  readonly weight_version?: number;
  /** The turn is a gold action rendered as the model's turn (no logprobs: supervised data). */
  readonly gold?: true;
}

/** One episode of a token-mode run, as a trainer takes it. */
export interface TokenRecord {
  readonly run_id: string;
  /** `<run_id>:<episode>`. */
  readonly episode_id: string;
  readonly episode: number;
  /** A benchmark's task; else the episode's initial state id. */
  readonly task_id: string;
  /** The GRPO group: the episodes of one task (of one initial state outside a benchmark) in this run. */
  readonly group_id: string;
  /** The trial of the task (its index within the group). */
  readonly trial: number;
  readonly input_ids: readonly number[];
  /** The first prompt's length: `input_ids[:prompt_length]` is what the model was first given. */
  readonly prompt_length: number;
  readonly loss_mask: readonly (0 | 1)[];
  readonly logprobs: readonly (number | null)[];
  readonly turns: readonly TokenSpan[];
  /** The episode's return (failed steps count 0), a benchmark's verdict included. */
  readonly reward: number;
  readonly success?: boolean;
  readonly terminated: boolean;
  readonly truncated: boolean;
  readonly reason: string;
  /** The server's model name. */
  readonly model: string;
  readonly sampling: LlmRunConfig['sampling'];
  /** The oldest weight version among the turns (the one staleness counts from), when known. */
  readonly weight_version?: number;
  /** A turn's environment ids could not be rendered prefix-stable (see the `drift` of its llm_call event). */
  readonly drift: boolean;
  /**
   * An agent program's episode (`--policy cmd:`) whose history was not one sequence (a compacted
   * context, a sub-agent): which of its sequences this record is, from 0; each carries the
   * episode's reward and id. Absent when the episode is one sequence.
   */
  readonly segment?: number;
}

/** Every episode of a token-mode run folder as a token record, in episode order. */
export async function exportTokens(dir: string, options: Omit<ExportOptions, 'state' | 'gamma'> = {}): Promise<TokenRecord[]> {
  const manifest = JSON.parse(await readFile(path.join(dir, RUN_FILES.manifest), 'utf8')) as { run_id: string; env_dir: string; config: { llm?: LlmRunConfig } };
  // A served run has no llm config of its own: its rollouts requests' turns say how they were sampled.
  const llm = manifest.config.llm;
  const notTokens = (): AgentError =>
    new AgentError('BAD_USAGE', `${dir} was not run in token mode: its model turns carry no token ids`, {
      hint: 'Run with --policy llm:<model> --llm-base-url <vLLM server> --tokens (agent run or agent benchmark), or serve rollouts (agent serve), then export that run; --format chat exports the conversations of any llm: run.',
    });
  if (llm !== undefined && !llm.tokens) throw notTokens();
  const steps = await exportSteps(dir, { ...options, state: 'none' });
  const verdicts = await readVerdicts(dir, manifest.env_dir);
  const verdictValue = verdictReader(verdicts, options.verdict ?? 'success', dir);
  const reading = new RecordReading(options.lenient);
  const episodes = new Map<number, EpisodeRecord>();
  await forEachLine(path.join(dir, RUN_FILES.episodes), (r) => void episodes.set((r as unknown as EpisodeRecord).episode, r as unknown as EpisodeRecord), { schema: 'episode-record', reading });
  const turns = new Map<number, TurnOf[]>();
  const starts = new Map<number, string>();
  // A served run's stale groups were never sent to the trainer: their episodes are not training data.
  const discarded = new Set<number>();
  await forEachLine(path.join(dir, RUN_FILES.events), (e) => {
    if (e['type'] === 'episode_started') starts.set(e['episode'] as number, e['initial_state_id'] as string);
    if (e['type'] === 'rollout_discarded') for (const n of e['episodes'] as number[]) discarded.add(n);
    if (e['type'] !== 'llm_call' || e['role'] !== 'policy' || e['tokens'] === undefined) return;
    const episode = e['episode'] as number;
    const list = turns.get(episode) ?? [];
    list.push({ step: e['step'] as number, tokens: e['tokens'] as unknown as TokenTurn });
    turns.set(episode, list);
  }, { reading });
  const stepsOf = new Map<number, ExportRecord[]>();
  for (const s of steps) {
    const list = stepsOf.get(s.episode);
    if (list) list.push(s);
    else stepsOf.set(s.episode, [s]);
  }
  if (llm === undefined && turns.size === 0) throw notTokens();
  const trials = new Map<string, number>();
  const out: TokenRecord[] = [];
  for (const episode of [...turns.keys()].sort((a, b) => a - b)) {
    if (discarded.has(episode)) continue;
    const episodeSteps = stepsOf.get(episode) ?? [];
    const all = turns.get(episode) as TurnOf[];
    const record = episodes.get(episode);
    const verdict = verdicts.get(episode);
    const bonus = verdict ? verdictValue(verdict) : 0;
    const lastStep = episodeSteps[episodeSteps.length - 1];
    const taskId = verdict?.task_id ?? starts.get(episode) ?? '';
    const trial = trials.get(taskId) ?? 0;
    trials.set(taskId, trial + 1);
    out.push(
      ...episodeTokenRecords({
        runId: manifest.run_id,
        episode,
        taskId,
        trial,
        turns: all,
        // exportSteps puts the verdict on the last step; here it goes on the episode's last turn, which may have chosen no step.
        steps: episodeSteps.map((s) => ({ step: s.step, reward: (s.reward ?? 0) - (s === lastStep ? bonus : 0) })),
        bonus,
        reward: lastStep ? lastStep.episode_return : bonus,
        ...(verdict ? { success: verdict.success } : {}),
        end: record ?? { terminated: false, truncated: true, reason: 'interrupted' },
        sampling: samplingOf(llm, all, episode, dir),
        where: path.join(dir, RUN_FILES.events),
      }),
    );
  }
  return out;
}

/** An episode's sampling: the run's, or (a served run's rollouts) what its turns say. */
function samplingOf(llm: LlmRunConfig | undefined, turns: readonly TurnOf[], episode: number, dir: string): LlmRunConfig['sampling'] {
  const sampling = llm?.sampling ?? turns[0]?.tokens.sampling;
  if (!sampling) throw new AgentError('RECORD_INVALID', `${path.join(dir, RUN_FILES.events)}: episode ${episode}'s turns do not say how they were sampled, and the run's config does not either`, { hint: 'The run was written by an older version: export it with that version.' });
  return sampling;
}

/** A generated turn and the step it was asked for (its `llm_call` event's). */
export interface TurnOf {
  readonly step: number;
  readonly tokens: TokenTurn;
  /** The step the episode's next turn was asked for (in a segmented episode, another sequence's turn may come next). */
  readonly next?: number;
}

/** What one episode's token record is made of. */
export interface TokenRecordInput {
  readonly runId: string;
  readonly episode: number;
  readonly taskId: string;
  readonly trial: number;
  readonly turns: readonly TurnOf[];
  /** Each settled step's reward as it stands (delayed rewards that landed included). */
  readonly steps: readonly { readonly step: number; readonly reward: number }[];
  /** Added to the last turn's reward: a benchmark's verdict. */
  readonly bonus?: number;
  /** The episode's return. */
  readonly reward: number;
  readonly success?: boolean;
  readonly end: { readonly terminated: boolean; readonly truncated: boolean; readonly reason: string };
  readonly sampling: LlmRunConfig['sampling'];
  /** Where the turns were read, for an error that says which record is damaged. */
  readonly where: string;
  /** Which of the episode's sequences these turns are (an agent program's episode in segments). */
  readonly segment?: number;
}

/**
 * An episode's token records: one, or one per segment when an agent program's history was not one
 * sequence (each with the episode's id and reward; a benchmark's verdict on the episode's last turn).
 * A turn chooses the steps up to the episode's next turn, whichever segment that is in.
 */
export function episodeTokenRecords(input: TokenRecordInput): TokenRecord[] {
  const all = input.turns;
  // An episode that ended before its first model turn (a prompt past the context, the server down) has no tokens to train on.
  if (all.length === 0) return [];
  const segments = new Map<number, TurnOf[]>();
  all.forEach((t, i) => {
    const k = t.tokens.segment ?? 0;
    segments.set(k, [...(segments.get(k) ?? []), { ...t, next: all[i + 1]?.step ?? Number.POSITIVE_INFINITY }]);
  });
  if (segments.size <= 1) return [tokenRecord(input)];
  const last = all[all.length - 1]?.tokens.segment ?? 0;
  return [...segments].sort((a, b) => a[0] - b[0]).map(([segment, turns]) => tokenRecord({ ...input, turns, bonus: segment === last ? (input.bonus ?? 0) : 0, segment }));
}

/** One episode's turns as one sequence: the environment's ids masked out, each generated turn's span with the rewards of the steps it chose. */
export function tokenRecord(input: TokenRecordInput): TokenRecord {
  const { turns: list, episode } = input;
  if (list.length === 0) throw new AgentError('RECORD_INVALID', `${input.where}: episode ${episode} has no model turn to make a token record of`, { hint: 'Make records of episodes with turns (episodeTokenRecords skips the others).' });
  const inputIds: number[] = [];
  const mask: (0 | 1)[] = [];
  const logprobs: (number | null)[] = [];
  const spans: TokenSpan[] = [];
  let drift = false;
  let oldest: number | undefined;
  list.forEach(({ step, tokens }, i) => {
    for (const id of tokens.env_ids) {
      inputIds.push(id);
      mask.push(0);
      logprobs.push(null);
    }
    if (tokens.prompt_length !== inputIds.length) {
      throw new AgentError('RECORD_INVALID', `${input.where}: episode ${episode} turn ${i + 1} says its prompt was ${tokens.prompt_length} tokens, but its turns before it add up to ${inputIds.length}`, { hint: 'The events log is damaged or was edited: export another run.' });
    }
    const start = inputIds.length;
    tokens.token_ids.forEach((id, k) => {
      inputIds.push(id);
      mask.push(1);
      logprobs.push(tokens.logprobs[k] ?? null);
    });
    const next = list[i]?.next ?? list[i + 1]?.step ?? Number.POSITIVE_INFINITY;
    const chosen = input.steps.filter((s) => s.step >= step && s.step < next);
    const isLast = i === list.length - 1;
    spans.push({
      start,
      end: inputIds.length,
      reward: round(chosen.reduce((sum, s) => sum + s.reward, 0) + (isLast ? (input.bonus ?? 0) : 0)),
      finish_reason: tokens.finish_reason,
      ...(chosen[0] ? { step: chosen[0].step } : {}),
      ...(tokens.invalid !== undefined ? { invalid: tokens.invalid } : {}),
      ...(tokens.weight_version !== undefined ? { weight_version: tokens.weight_version } : {}),
      ...(tokens.gold ? { gold: true as const } : {}),
    });
    if (tokens.drift) drift = true;
    if (tokens.weight_version !== undefined) oldest = Math.min(oldest ?? tokens.weight_version, tokens.weight_version);
  });
  const first = list[0] as TurnOf;
  return {
    run_id: input.runId,
    episode_id: `${input.runId}:${episode}`,
    episode,
    task_id: input.taskId,
    group_id: input.taskId,
    trial: input.trial,
    input_ids: inputIds,
    prompt_length: first.tokens.env_ids.length,
    loss_mask: mask,
    logprobs,
    turns: spans,
    reward: round(input.reward),
    ...(input.success !== undefined ? { success: input.success } : {}),
    terminated: input.end.terminated,
    truncated: input.end.truncated,
    reason: input.end.reason,
    model: first.tokens.model,
    sampling: input.sampling,
    ...(oldest !== undefined ? { weight_version: oldest } : {}),
    drift,
    ...(input.segment !== undefined ? { segment: input.segment } : {}),
  };
}

function round(n: number): number {
  return Math.round(n * 1e9) / 1e9;
}

/** Parquet columns of a token record: the sequences as typed lists (`list<int32>`, `list<float>`), the turns as a list of structs. */
const TOKEN_FIELDS: readonly Field[] = [
  scalar('run_id', 'STRING', true),
  scalar('episode_id', 'STRING', true),
  scalar('episode', 'INT32', true),
  scalar('task_id', 'STRING', true),
  scalar('group_id', 'STRING', true),
  scalar('trial', 'INT32', true),
  scalar('segment', 'INT32'),
  list('input_ids', (n) => scalar(n, 'INT32', true), true),
  scalar('prompt_length', 'INT32', true),
  list('loss_mask', (n) => scalar(n, 'INT32', true), true),
  list('logprobs', (n) => scalar(n, 'FLOAT'), true),
  list('turns', (n) => struct(n, [scalar('start', 'INT32', true), scalar('end', 'INT32', true), scalar('reward', 'DOUBLE', true), scalar('finish_reason', 'STRING', true), scalar('step', 'INT32'), scalar('invalid', 'STRING'), scalar('weight_version', 'INT32'), scalar('gold', 'BOOLEAN')], true), true),
  scalar('reward', 'DOUBLE', true),
  scalar('success', 'BOOLEAN'),
  scalar('terminated', 'BOOLEAN', true),
  scalar('truncated', 'BOOLEAN', true),
  scalar('reason', 'STRING', true),
  scalar('model', 'STRING', true),
  struct('sampling', [scalar('temperature', 'DOUBLE', true), scalar('top_p', 'DOUBLE', true), scalar('max_tokens', 'INT32', true), scalar('seed', 'INT32', true)], true),
  scalar('weight_version', 'INT32'),
  scalar('drift', 'BOOLEAN', true),
];

/** Token records to a Parquet file (pyarrow reads `input_ids` as `list<int32>`, `logprobs` as `list<float>`). */
export async function writeTokensParquet(file: string, records: readonly TokenRecord[]): Promise<void> {
  await writeNestedParquet(file, TOKEN_FIELDS, records);
}
