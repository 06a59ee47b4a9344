/**
 * `agent export --format chat`: one record per episode in OpenAI's chat fine-tuning shape, what
 * TRL's SFT and GRPO trainers, verl's multi-turn datasets and OpenAI fine-tuning read:
 * - `messages`: the system prompt (the env's `policy.md` when it has one), the user's request (a
 *   benchmark task's instruction, else the initial state), then per step an assistant turn with
 *   one tool call (`id` = the trace id, `function.arguments` a JSON string) and the `tool` turn
 *   that answers it (`tool_call_id` the same id; the tool's result, or its error). Every tool call
 *   is answered exactly once; an episode with no step is exported too.
 * - `tools`: the env's actions as OpenAI function tools.
 * - the episode's `reward` (its return, a benchmark's success included), `step_rewards` for
 *   process-reward training, `success` and `task_id` for benchmark runs.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { JsonValue } from '../shared/json.js';
import { loadEnvDefinition } from '../env/load-env.js';
import { exportRun, readVerdicts, type ExportOptions, type ExportRecord } from './export.js';
import { forEachLine, RecordReading } from './run-rewards.js';
import { RUN_FILES, type EpisodeRecord, type StateRecord } from './run-writer.js';

export interface ChatToolCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

export type ChatTurn =
  | { readonly role: 'system' | 'user'; readonly content: string }
  | { readonly role: 'assistant'; readonly content: string; readonly tool_calls: readonly ChatToolCall[] }
  | { readonly role: 'tool'; readonly tool_call_id: string; readonly name: string; readonly content: string };

export interface ChatRecord {
  readonly run_id: string;
  readonly episode: number;
  readonly task_id?: string;
  readonly messages: readonly ChatTurn[];
  readonly tools: readonly { readonly type: 'function'; readonly function: { readonly name: string; readonly description?: string; readonly parameters: JsonValue } }[];
  /** The episode's return by the chosen basis (failed steps count 0), a benchmark's success included. */
  readonly reward: number;
  /** Per step, in order: its reward (null for a failed step). */
  readonly step_rewards: readonly (number | null)[];
  readonly success?: boolean;
  readonly terminated: boolean;
  readonly truncated: boolean;
}

/** Every episode of a run folder as a chat record, in episode order. */
export async function exportChat(dir: string, options: Omit<ExportOptions, 'state' | 'gamma'> = {}): Promise<ChatRecord[]> {
  const steps = await exportRun(dir, { ...options, state: 'none' });
  const manifest = JSON.parse(await readFile(path.join(dir, RUN_FILES.manifest), 'utf8')) as { run_id: string; env_dir: string };
  const verdicts = await readVerdicts(dir, manifest.env_dir);
  const system = await readOptional(path.join(manifest.env_dir, 'policy.md'));
  const tools = existsSync(manifest.env_dir)
    ? [...(await loadEnvDefinition(manifest.env_dir)).actions.values()].map((a) => ({ type: 'function' as const, function: { name: a.name, ...(a.description ? { description: a.description } : {}), parameters: { type: 'object', ...(a.parameters as object) } as JsonValue } }))
    : [];
  // Episodes with no step have no export record: they come from episodes.jsonl, with their initial state.
  const reading = new RecordReading(options.lenient);
  const episodes = new Map<number, EpisodeRecord>();
  await forEachLine(path.join(dir, RUN_FILES.episodes), (r) => void episodes.set((r as unknown as EpisodeRecord).episode, r as unknown as EpisodeRecord), { schema: 'episode-record', reading });
  const initial = new Map<string, JsonValue>();
  await forEachLine(path.join(dir, RUN_FILES.states), (r) => void initial.set((r as unknown as StateRecord).state_id, (r as unknown as StateRecord).state), { schema: 'state-record', reading });
  const byEpisode = new Map<number, ExportRecord[]>();
  for (const s of steps) byEpisode.set(s.episode, [...(byEpisode.get(s.episode) ?? []), s]);
  const indices = [...new Set([...episodes.keys(), ...byEpisode.keys()])].sort((a, b) => a - b);
  return indices.map((episode) => {
    const list = byEpisode.get(episode) ?? [];
    const record = episodes.get(episode);
    const verdict = verdicts.get(episode);
    const user = verdict?.instruction ?? `The environment's state:\n${JSON.stringify(record ? (initial.get(record.initial_state_id) ?? null) : null)}`;
    const messages: ChatTurn[] = [...(system ? [{ role: 'system' as const, content: system }] : []), { role: 'user', content: user }];
    for (const s of list) {
      messages.push({ role: 'assistant', content: '', tool_calls: [{ id: s.trace_id, type: 'function', function: { name: s.action, arguments: JSON.stringify(s.params) } }] });
      messages.push({ role: 'tool', tool_call_id: s.trace_id, name: s.action, content: s.status === 'failed' ? `Error: ${s.error?.code ?? 'FAILED'}: ${s.error?.message ?? ''}` : typeof s.result === 'string' ? s.result : JSON.stringify(s.result) });
    }
    const last = list[list.length - 1];
    return {
      run_id: manifest.run_id,
      episode,
      ...(verdict ? { task_id: verdict.task_id } : {}),
      messages,
      tools,
      reward: last ? last.episode_return : verdict?.success ? 1 : 0,
      step_rewards: list.map((s) => s.reward),
      ...(verdict ? { success: verdict.success } : {}),
      terminated: record?.terminated ?? last?.terminated ?? false,
      truncated: record?.truncated ?? last?.truncated ?? true,
    };
  });
}

async function readOptional(file: string): Promise<string | undefined> {
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    return undefined;
  }
}
