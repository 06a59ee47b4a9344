/**
 * `agent export <suite> --format verl`: a suite's tasks as a verl RL dataset, one row per task, in
 * the columns verl's RLHFDataset and its multi-turn tool agent read (verl's
 * examples/data_preprocess/*_multiturn_w_tool.py write the same):
 * - `data_source` (the suite), `agent_name` (`tool_agent`, verl's tool-calling agent loop),
 *   `prompt` (the system prompt an `llm:` agent gets, then the task's instruction), `ability`;
 * - `reward_model` {`style`, `ground_truth`: the task's gold actions and outputs as JSON text};
 * - `extra_info` {`split`, `index`, `task_id`, `need_tools_kwargs`, `tools_kwargs` (per action,
 *   `create_kwargs` naming the task, so a tool that drives `agent serve` resets to it),
 *   `interaction_kwargs` (`name`, `task_id`: for a simulated-user interaction)}.
 * Given a benchmark run folder, the rows are that run's tasks, from its suite and split.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { AgentEnv } from '../../env/agent-env.js';
import { list, scalar, struct, writeNestedParquet } from '../../replay/parquet-schema.js';
import { RUN_FILES } from '../../replay/run-writer.js';
import { AgentError } from '../../shared/errors.js';
import { agentSystemPrompt } from './benchmark.js';
import { loadSuite } from './suite.js';
import { resolveSuite } from './suites.js';

/** The interaction name rows carry in `interaction_kwargs.name` (verl looks interactions up by it). */
export const VERL_INTERACTION = 'agentic_rl';

/** One row of a verl RL dataset made from a suite's task: prompt, reward model with the gold answer, and the tool and interaction arguments verl's agent loop reads. */
export interface VerlRow {
  readonly data_source: string;
  readonly agent_name: 'tool_agent';
  readonly prompt: readonly { readonly role: 'system' | 'user'; readonly content: string }[];
  readonly ability: 'agent';
  readonly reward_model: { readonly style: 'rule'; readonly ground_truth: string };
  readonly extra_info: {
    readonly split: string;
    readonly index: number;
    readonly task_id: string;
    readonly need_tools_kwargs: true;
    readonly tools_kwargs: Readonly<Record<string, { readonly create_kwargs: { readonly task_id: string } }>>;
    readonly interaction_kwargs: { readonly name: string; readonly task_id: string };
  };
}

/** A suite (a folder or a shipped suite's name) or a benchmark run folder, as verl dataset rows. */
export async function verlDataset(source: string, options: { readonly split?: string } = {}): Promise<VerlRow[]> {
  let suiteSpec = source;
  let split = options.split;
  let only: string[] | undefined;
  if (existsSync(path.join(source, RUN_FILES.manifest))) {
    const report = await readBenchmark(source);
    suiteSpec = (JSON.parse(await readFile(path.join(source, RUN_FILES.manifest), 'utf8')) as { env_dir: string }).env_dir;
    split = options.split ?? report.split;
    only = report.tasks.map((t) => t.id);
  }
  const dir = resolveSuite(suiteSpec);
  await using env = await AgentEnv.open(dir);
  const suite = await loadSuite(dir, split, env.definition.initialStates[0] ?? null, only ? { only } : {});
  const system = await agentSystemPrompt(suite);
  // The model's tools: every action of the agent's but `respond` (its plain text is what it says).
  const actions = [...env.definition.actions.values()].filter((a) => a.name !== 'respond' && a.actor !== 'user').map((a) => a.name);
  return suite.tasks.map((task, index) => ({
    data_source: suite.name,
    agent_name: 'tool_agent',
    prompt: [
      { role: 'system', content: system },
      { role: 'user', content: task.instruction },
    ],
    ability: 'agent',
    reward_model: { style: 'rule', ground_truth: JSON.stringify({ actions: task.actions, outputs: task.outputs }) },
    extra_info: {
      split: suite.split,
      index,
      task_id: task.id,
      need_tools_kwargs: true,
      tools_kwargs: Object.fromEntries(actions.map((a) => [a, { create_kwargs: { task_id: task.id } }])),
      interaction_kwargs: { name: VERL_INTERACTION, task_id: task.id },
    },
  }));
}

async function readBenchmark(dir: string): Promise<{ split?: string; tasks: { id: string }[] }> {
  try {
    return JSON.parse(await readFile(path.join(dir, 'benchmark.json'), 'utf8')) as { split?: string; tasks: { id: string }[] };
  } catch {
    throw new AgentError('BAD_USAGE', `'${dir}' is a run folder but not a benchmark run's: a verl dataset is a suite's tasks`, {
      hint: 'Pass a suite (agent export tau-bench/airline --format verl), or the folder agent benchmark wrote.',
    });
  }
}

/** The rows as Parquet: `prompt`, `reward_model` and `extra_info` nested (lists and structs), as verl's preprocessing scripts write them. */
export async function writeVerlParquet(file: string, rows: readonly VerlRow[]): Promise<void> {
  const tools = Object.keys(rows[0]?.extra_info.tools_kwargs ?? {});
  await writeNestedParquet(
    file,
    [
      scalar('data_source', 'STRING', true),
      scalar('agent_name', 'STRING', true),
      list('prompt', (n) => struct(n, [scalar('role', 'STRING', true), scalar('content', 'STRING', true)], true), true),
      scalar('ability', 'STRING', true),
      struct('reward_model', [scalar('style', 'STRING', true), scalar('ground_truth', 'STRING', true)], true),
      struct(
        'extra_info',
        [
          scalar('split', 'STRING', true),
          scalar('index', 'INT32', true),
          scalar('task_id', 'STRING', true),
          scalar('need_tools_kwargs', 'BOOLEAN', true),
          struct('tools_kwargs', tools.map((t) => struct(t, [struct('create_kwargs', [scalar('task_id', 'STRING', true)], true)], true)), true),
          struct('interaction_kwargs', [scalar('name', 'STRING', true), scalar('task_id', 'STRING', true)], true),
        ],
        true,
      ),
    ],
    rows,
  );
}
