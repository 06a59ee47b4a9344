/**
 * Writes a τ²-bench domain as a benchmark suite (fixtures/tau2-bench/<domain>/) from τ²'s data:
 * the env (env.json, actions.json: τ²'s agent tools as it gives them to a model, plus `respond`, and
 * its user tools as actions of `"actor": "user"`;
 * state_schema.json: its DB models; initial_state.json: its DB), the agent policy, and one task file
 * per split of split_tasks.json, each task with its start (initial_patch: τ²'s `set_state` of the
 * task, run by the port), its gold actions, what the agent must say, and τ²'s evaluation criteria.
 *
 *     npx tsx scripts/tau2-bench-import.ts <tau2-bench folder> <domain> [<DBs as JSON>] [--out <folder>]
 *
 * <DBs as JSON> is scripts/tau2-bench-oracle.py <folder> <domain> --db: the DBs as τ² loads them (every
 * field, defaults filled in), needed where τ²'s files are TOML (telecom); else <domain>/db.json (and
 * user_db.json) are read.
 *
 * Needs the domain's tau2-schemas.json (scripts/tau2-bench-oracle.py <folder> <domain> --schemas)
 * and its tools.ts. Run scripts/tau2-bench-oracle.py for tasks/base.expected.jsonl. A task whose
 * start τ² could not set (an initialization action naming a function its toolkit lacks, data for a
 * side that has no DB) is named with the reason, and nothing is written.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { JsonObject, JsonValue } from '../src/index.js';
import { PyError, type Tau2Domain, type Tau2Schemas, type Tau2State } from '../fixtures/tau2-bench/core/domain.js';
import { agentHistory, taskInitialState, type EvaluationCriteria, type InitialState } from '../fixtures/tau2-bench/core/tasks.js';

interface Tau2Task {
  readonly id: string;
  readonly user_scenario: { readonly persona?: string | null; readonly instructions: string | Readonly<Record<string, string | null>> };
  readonly initial_state?: InitialState | null;
  readonly evaluation_criteria?: EvaluationCriteria | null;
}

/** Python's textwrap.indent: the prefix on every line that is not only whitespace. */
const indent = (text: string, prefix = '\t'): string => text.split(/(?<=\n)/).map((l) => (l.trim() === '' ? l : prefix + l)).join('');

/** τ²'s `str(UserScenario)`: what its simulated user is told. */
export function scenarioText(s: Tau2Task['user_scenario']): string {
  const i = s.instructions;
  const instructions = typeof i === 'string'
    ? i
    : [
        `Domain: ${i['domain'] ?? ''}`,
        `Reason for call:\n${indent(i['reason_for_call'] ?? '')}`,
        ...(i['known_info'] != null ? [`Known info:\n${indent(i['known_info'])}`] : []),
        ...(i['unknown_info'] != null ? [`Unknown info:\n${indent(i['unknown_info'])}`] : []),
        `Task instructions:\n${indent(i['task_instructions'] ?? '')}`,
      ].join('\n');
  return [...(s.persona != null ? ['Persona:', indent(s.persona)] : []), 'Instructions:', indent(instructions)].join('\n');
}

/**
 * The key order of every object in a JSON text whose keys JavaScript would reorder (integer-like
 * ones come first in an object): each key is read with a mark that keeps it a string, then unmarked.
 */
const MARK = '\u0000';
export function integerKeyOrders(text: string): string[][] {
  const orders: string[][] = [];
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (typeof v === 'object' && v !== null) {
      const keys = Object.keys(v);
      if (keys.some((k) => k.startsWith(MARK))) orders.push(keys.map((k) => (k.startsWith(MARK) ? k.slice(MARK.length) : k)));
      Object.values(v).forEach(visit);
    }
  };
  visit(JSON.parse(text.replace(/(?<!\\)"(\d+)"(\s*):/g, '"\\u0000$1"$2:')));
  return orders;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const at = args.indexOf('--out');
  const outArg = at >= 0 ? args.splice(at, 2)[1] : undefined;
  const [folder, domainName, dbsFile] = args;
  if (!folder || !domainName || (at >= 0 && !outArg)) throw new Error('usage: npx tsx scripts/tau2-bench-import.ts <tau2-bench folder> <domain> [<DBs as JSON>] [--out <folder>]');
  const src = path.resolve(folder, domainName);
  // The port (its schemas and tools) is read from the fixtures; what is generated goes to --out, by default beside it.
  const port = path.resolve(import.meta.dirname, '..', 'fixtures', 'tau2-bench', domainName);
  const out = outArg ? path.resolve(outArg) : port;
  const read = async <T>(file: string): Promise<T> => JSON.parse(await readFile(file, 'utf8')) as T;
  const schemas = await read<Tau2Schemas>(path.join(port, 'tau2-schemas.json'));
  const { domain } = (await import(path.join(port, 'tools.ts'))) as { domain: Tau2Domain };
  const dbText = await readFile(dbsFile ?? path.join(src, 'db.json'), 'utf8');
  const orders = integerKeyOrders(dbText);
  const base: Tau2State = dbsFile
    ? (JSON.parse(dbText) as Tau2State)
    : { db: JSON.parse(dbText) as JsonObject, ...(schemas.user_db ? { user_db: await read<JsonObject>(path.join(src, 'user_db.json')) } : {}) };

  const actions = [
    ...(schemas.tools.assistant ?? []).map((t) => (t.schema as unknown as { function: JsonObject }).function),
    // The user's tools, for the user's side of the episode: never offered to the agent.
    ...(schemas.tools.user ?? []).map((t) => ({ ...(t.schema as unknown as { function: JsonObject }).function, actor: 'user' })),
    { name: 'respond', description: 'Say something to the user (your message, as plain text).', parameters: { type: 'object', properties: { content: { type: 'string', description: 'The message.' } }, required: ['content'] } },
  ];
  // pydantic's datetimes are naive ("2025-01-15T10:30:00"), which JSON Schema's date-time refuses: the state schema says string.
  const naive = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(naive) : typeof v === 'object' && v !== null ? Object.fromEntries(Object.entries(v).filter(([k, x]) => !(k === 'format' && x === 'date-time')).map(([k, x]) => [k, naive(x)])) : v;
  const dbDefs = naive({ ...schemas.db.$defs, ...schemas.user_db?.$defs }) as JsonObject;
  const strip = ({ $defs: _d, ...rest }: Record<string, unknown>): JsonObject => naive(rest) as JsonObject;
  const stateSchema = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: `τ²-bench ${domainName}: the agent's DB${schemas.user_db ? ' and the user\'s' : ''}`,
    type: 'object',
    required: ['db'],
    properties: {
      db: strip(schemas.db as Record<string, unknown>),
      ...(schemas.user_db ? { user_db: strip(schemas.user_db as Record<string, unknown>), shared_db: { const: true, description: 'τ²\'s aliasing: the user\'s toolkit works on the agent\'s DB (after initialization data)' } } : {}),
    },
    $defs: dbDefs,
  };
  // Telecom's small split has a task file of its own.
  const tasks = [...(await read<Tau2Task[]>(path.join(src, 'tasks.json')))];
  if (existsSync(path.join(src, 'tasks_small.json'))) {
    const known = new Set(tasks.map((t) => t.id));
    tasks.push(...(await read<Tau2Task[]>(path.join(src, 'tasks_small.json'))).filter((t) => !known.has(t.id)));
  }
  const splits = await read<Record<string, string[]>>(path.join(src, 'split_tasks.json'));
  const lines = new Map<string, string>();
  const problems: string[] = [];
  for (const task of tasks) {
    let start: Tau2State;
    try {
      start = taskInitialState(domain, base, task.initial_state);
    } catch (err) {
      if (!(err instanceof PyError)) throw err;
      problems.push(`task '${task.id}': τ² cannot set its initial state: ${err.message}`);
      continue;
    }
    const criteria = task.evaluation_criteria ?? null;
    const patch = (['db', 'user_db', 'shared_db'] as const).flatMap((k) => {
      const before = base[k] as JsonValue | undefined;
      const after = start[k] as JsonValue | undefined;
      if (JSON.stringify(before) === JSON.stringify(after)) return [];
      return [after === undefined ? { op: 'remove', path: `/${k}` } : { op: before === undefined ? 'add' : 'replace', path: `/${k}`, value: after }];
    });
    const line = {
      id: task.id,
      instruction: scenarioText(task.user_scenario),
      ...(patch.length > 0 ? { initial_patch: patch } : {}),
      actions: (criteria?.actions ?? []).map((a) => ({ name: a.name, params: a.arguments, ...(a.requestor === 'user' ? { actor: 'user' } : {}) })),
      outputs: criteria?.communicate_info ?? [],
      success: { module: 'tools.ts', export: 'score' },
      criteria: { ...(criteria ?? {}), ...(task.initial_state ? { initial_state: task.initial_state } : {}) },
      ...(task.initial_state?.message_history?.length ? { history: agentHistory(task.initial_state.message_history) } : {}),
    };
    lines.set(task.id, JSON.stringify(line));
  }
  if (problems.length > 0) {
    process.stderr.write(`${problems.join('\n')}\nnothing was written: fix the task data (or the port's functions) and import again\n`);
    process.exitCode = 1;
    return;
  }
  if (orders.length > 0) await writeFile(path.join(out, 'key_order.json'), `${JSON.stringify(orders)}\n`);
  await mkdir(path.join(out, 'tasks'), { recursive: true });
  for (const [split, ids] of Object.entries(splits)) {
    const missing = ids.filter((id) => !lines.has(id));
    if (missing.length > 0) {
      process.stderr.write(`split ${split}: ${missing.length} of its ${ids.length} tasks are not in the task files; left out\n`);
      continue;
    }
    await writeFile(path.join(out, 'tasks', `${split}.jsonl`), ids.map((id) => `${lines.get(id)}\n`).join(''));
  }
  const json = (v: unknown): string => `${JSON.stringify(v, null, 2)}\n`;
  await writeFile(path.join(out, 'actions.json'), json(actions));
  await writeFile(path.join(out, 'state_schema.json'), json(stateSchema));
  await writeFile(path.join(out, 'initial_state.json'), `${JSON.stringify(base)}\n`);
  // Telecom's policy is two documents, joined as τ²'s get_environment joins them (the manual variant).
  const policy = existsSync(path.join(src, 'policy.md'))
    ? await readFile(path.join(src, 'policy.md'), 'utf8')
    : `<main_policy>\n${await readFile(path.join(src, 'main_policy.md'), 'utf8')}\n</main_policy>\n<tech_support_policy>\n${await readFile(path.join(src, 'tech_support_manual.md'), 'utf8')}\n</tech_support_policy>`;
  await writeFile(path.join(out, 'policy.md'), policy);
}

await main();
