/**
 * `agent export --format chat`: one record per episode in OpenAI's chat fine-tuning shape, what
 * TRL's SFT and GRPO trainers, verl's multi-turn datasets and OpenAI fine-tuning read:
 * - `messages`: the system prompt (the env's `policy.md` when it has one), the user's request (a
 *   benchmark task's instruction, else the initial state), then per step an assistant turn with
 *   one tool call (`id` = the trace id, `function.arguments` a JSON string) and the `tool` turn
 *   that answers it (`tool_call_id` the same id; the tool's result, or its error). Every tool call
 *   is answered exactly once; an episode with no step is exported too.
 * - `tools`: the env's actions as OpenAI function tools.
 * - an `llm:` run's episodes are its conversations.jsonl as they were: what the model was given and
 *   answered (its own text, its call ids, its refused calls), with the env's actions but `respond`
 *   as tools (its plain text is its `respond`).
 * - the episode's `reward` (its return, a benchmark's success included), `step_rewards` for
 *   process-reward training, `success` and `task_id` for benchmark runs.
 * - `user_turns` says where the user's messages come from. A suite whose tasks are scenarios for a
 *   simulated user (`suite.json` `"instructions": "user_scenario"`, as τ-bench's: "You are Yusuf
 *   Rossi in 19122. You want to…") gives an episode without a conversation (a gold or a
 *   policy-module run) that scenario as its user message: `user_scenario`, something no user would
 *   say and the agent never saw. `userTurns: 'said'` keeps only records whose user turns are what a
 *   user said (an `llm:` run's conversation, its simulated user's messages included; a request).
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { JsonValue } from '../shared/json.js';
import { WellFormed } from '../shared/well-formed.js';
import { loadEnvDefinition } from '../env/load-env.js';
import type { ChatTurn } from '../llm/chat-turns.js';
import { exportSteps, readVerdicts, reportReplaced, wellFormedStep, verdictReader, type ExportOptions, type ExportRecord } from './export.js';
import { list, scalar, struct, writeNestedParquet, type Field } from './parquet-schema.js';
import { forEachLine, RecordReading } from './run-rewards.js';
import { RUN_FILES, type EpisodeRecord, type StateRecord } from './run-writer.js';

export type { ChatToolCall, ChatTurn } from '../llm/chat-turns.js';

/** A tool as OpenAI's chat format declares one: a function with its name, description and JSON Schema parameters. */
export type ChatTool = { readonly type: 'function'; readonly function: { readonly name: string; readonly description?: string; readonly parameters: JsonValue } };

/** One episode as a chat for fine-tuning (`agent export --format chat`): its messages and tools, its reward and per-step rewards, and its end. */
export interface ChatRecord {
  readonly run_id: string;
  readonly episode: number;
  readonly task_id?: string;
  readonly messages: readonly ChatTurn[];
  readonly tools: readonly ChatTool[];
  /** The episode's return by the chosen basis (failed steps count 0), a benchmark's verdict (success, or `verdict`) included. */
  readonly reward: number;
  /** Per step, in order: its reward (null for a failed step). */
  readonly step_rewards: readonly (number | null)[];
  readonly success?: boolean;
  /** Benchmark runs with custom metrics (`agent benchmark --metric`): the episode's values. */
  readonly metrics?: Readonly<Record<string, number>>;
  readonly terminated: boolean;
  readonly truncated: boolean;
  /**
   * Where the user's messages come from: `conversation` (an `llm:` run's, as the model was given
   * them: a simulated user's messages, or the request), `request` (the task's instruction, written
   * as a user's request), `user_scenario` (the task's instruction is a simulated user's private
   * scenario: not what a user would say), `state` (no task: the initial state).
   */
  readonly user_turns: 'conversation' | 'request' | 'user_scenario' | 'state';
}

/** The chat export's own options: which records to keep by where their user turns come from. */
export interface ChatExportOptions extends Omit<ExportOptions, 'state' | 'gamma'> {
  /** `as-run` (default): every episode; `said`: only those whose user turns are what a user said (not a scenario, not a state). */
  readonly userTurns?: 'as-run' | 'said';
  /** With `said`: told how many episodes were left out. */
  readonly onLeftOut?: (count: number, why: string) => void;
}

/** Every episode of a run folder as a chat record, in episode order. */
export async function exportChat(dir: string, options: ChatExportOptions = {}): Promise<ChatRecord[]> {
  // Text is made well-formed before it is quoted into a message (a tool call's arguments, a state as JSON), and each record once more (conversations, instructions, tools).
  const text = new WellFormed();
  const steps = (await exportSteps(dir, { ...options, state: 'none' })).map((s) => wellFormedStep(text, s));
  const manifest = JSON.parse(await readFile(path.join(dir, RUN_FILES.manifest), 'utf8')) as { run_id: string; env_dir: string };
  const verdicts = await readVerdicts(dir, manifest.env_dir);
  const verdictValue = verdictReader(verdicts, options.verdict ?? 'success', dir);
  const system = await readOptional(path.join(manifest.env_dir, 'policy.md'));
  const scenarios = (JSON.parse((await readOptional(path.join(manifest.env_dir, 'suite.json'))) ?? '{}') as { instructions?: unknown }).instructions === 'user_scenario';
  const tools: ChatTool[] = existsSync(manifest.env_dir)
    ? [...(await loadEnvDefinition(manifest.env_dir)).actions.values()].filter((a) => a.actor !== 'user').map((a) => ({ type: 'function' as const, function: { name: a.name, ...(a.description ? { description: a.description } : {}), parameters: { type: 'object', ...(a.parameters as object) } as JsonValue } }))
    : [];
  // Episodes with no step have no export record: they come from episodes.jsonl, with their initial state.
  const reading = new RecordReading(options.lenient);
  const episodes = new Map<number, EpisodeRecord>();
  await forEachLine(path.join(dir, RUN_FILES.episodes), (r) => void episodes.set((r as unknown as EpisodeRecord).episode, r as unknown as EpisodeRecord), { schema: 'episode-record', reading });
  const initial = new Map<string, JsonValue>();
  await forEachLine(path.join(dir, RUN_FILES.states), (r) => void initial.set((r as unknown as StateRecord).state_id, (r as unknown as StateRecord).state), { schema: 'state-record', reading });
  const conversations = await readConversations(dir, reading);
  const byEpisode = new Map<number, ExportRecord[]>();
  for (const s of steps) byEpisode.set(s.episode, [...(byEpisode.get(s.episode) ?? []), s]);
  const indices = [...new Set([...episodes.keys(), ...byEpisode.keys()])].sort((a, b) => a - b);
  const all = indices.map((episode): ChatRecord => text.value(chatRecord(episode), `episode ${episode}`));
  reportReplaced(text, options);
  if (options.userTurns !== 'said') return all;
  const said = all.filter((r) => r.user_turns === 'conversation' || r.user_turns === 'request');
  if (said.length < all.length) options.onLeftOut?.(all.length - said.length, scenarios ? "their user message would be the task's scenario for a simulated user (no simulated user ran: run --policy llm:<model> --user llm:<model> for conversations)" : 'they have no task: their user message would be the initial state');
  return said;

  function chatRecord(episode: number): ChatRecord {
    const list = byEpisode.get(episode) ?? [];
    const record = episodes.get(episode);
    const verdict = verdicts.get(episode);
    const user = verdict?.instruction ?? `The environment's state:\n${JSON.stringify(text.value(record ? (initial.get(record.initial_state_id) ?? null) : null, `episode ${episode} initial state`))}`;
    const conversation = conversations.get(episode);
    const messages: ChatTurn[] = conversation ?? [...(system ? [{ role: 'system' as const, content: system }] : []), { role: 'user', content: user }];
    if (!conversation) {
      // The user's own calls (on their phone) are not turns of the agent's conversation.
      for (const s of list.filter((x) => x.actor !== 'user')) {
        messages.push({ role: 'assistant', content: '', tool_calls: [{ id: s.trace_id, type: 'function', function: { name: s.action, arguments: JSON.stringify(s.params) } }] });
        messages.push({ role: 'tool', tool_call_id: s.trace_id, name: s.action, content: s.status === 'failed' ? `Error: ${s.error?.code ?? 'FAILED'}: ${s.error?.message ?? ''}` : typeof s.result === 'string' ? s.result : JSON.stringify(s.result) });
      }
    }
    const last = list[list.length - 1];
    return {
      run_id: manifest.run_id,
      episode,
      ...(verdict ? { task_id: verdict.task_id } : {}),
      messages,
      tools: conversation ? tools.filter((t) => t.function.name !== 'respond') : tools,
      reward: last ? last.episode_return : verdict ? verdictValue(verdict) : 0,
      step_rewards: list.map((s) => s.reward),
      ...(verdict ? { success: verdict.success } : {}),
      ...(verdict?.metrics ? { metrics: verdict.metrics } : {}),
      terminated: record?.terminated ?? last?.terminated ?? false,
      truncated: record?.truncated ?? last?.truncated ?? true,
      user_turns: conversation ? 'conversation' : verdict?.instruction === undefined ? 'state' : scenarios ? 'user_scenario' : 'request',
    };
  }
}

/** An `llm:` run's conversations by episode (conversations.jsonl, written by agent benchmark); empty for another run. */
async function readConversations(dir: string, reading: RecordReading): Promise<Map<number, ChatTurn[]>> {
  const out = new Map<number, ChatTurn[]>();
  await forEachLine(path.join(dir, 'conversations.jsonl'), (r) => void out.set(r['episode'] as number, r['messages'] as ChatTurn[]), { schema: 'conversation-record', reading });
  return out;
}

async function readOptional(file: string): Promise<string | undefined> {
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    return undefined;
  }
}

/** One chat turn's Parquet struct: every role's fields, those a role lacks null (as datasets reads JSON). */
const turn = (name: string): Field =>
  struct(name, [
    scalar('role', 'STRING', true),
    scalar('content', 'STRING', true),
    list('tool_calls', (n) => struct(n, [scalar('id', 'STRING', true), scalar('type', 'STRING', true), struct('function', [scalar('name', 'STRING', true), scalar('arguments', 'STRING', true)], true)])),
    scalar('tool_call_id', 'STRING'),
    scalar('name', 'STRING'),
  ]);

/**
 * `--format chat-parquet`: the chat records as Parquet, `messages` a real nested column (a list of
 * turn structs) and `tools` JSON text: the actions' parameter schemas differ by tool, and a struct
 * column would give every tool every other tool's parameters as nulls. TRL's SFTTrainer decodes a
 * `tools` string itself. `metrics` is JSON text too: its names are the benchmark's own, and two
 * runs' files still concatenate.
 */
export async function writeChatParquet(file: string, records: readonly ChatRecord[]): Promise<void> {
  const fields = [
    scalar('run_id', 'STRING', true),
    scalar('episode', 'INT32', true),
    scalar('task_id', 'STRING'),
    list('messages', turn, true),
    scalar('tools', 'STRING', true),
    scalar('reward', 'DOUBLE', true),
    list('step_rewards', (n) => scalar(n, 'DOUBLE'), true),
    scalar('success', 'BOOLEAN'),
    scalar('metrics', 'STRING'),
    scalar('terminated', 'BOOLEAN', true),
    scalar('truncated', 'BOOLEAN', true),
    scalar('user_turns', 'STRING', true),
  ];
  await writeNestedParquet(
    file,
    fields,
    records.map((r) => ({ ...r, messages: r.messages.map((m) => ({ tool_calls: null, tool_call_id: null, name: null, ...m })), tools: JSON.stringify(r.tools), metrics: r.metrics ? JSON.stringify(r.metrics) : null })),
  );
}
