/** Reads a run folder back, validating every record against its schema in `schemas/`. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { validate } from '../schema/ajv.js';
import { metaSchema, type MetaSchemaName } from '../schema/meta-schemas.js';
import type { RewardLogRecord } from './reward-log.js';
import { ValidationError, type Issue } from '../shared/errors.js';
import { RUN_FILES, type EpisodeRecord, type StateRecord, type TrajectoryRecord } from './run-writer.js';

/** A run folder read whole: its manifest, events, trajectories, rewards, states, episodes and summary. */
export interface RunFolder {
  readonly manifest: Record<string, unknown>;
  readonly events: readonly Record<string, unknown>[];
  readonly trajectories: readonly TrajectoryRecord[];
  readonly rewards: readonly RewardLogRecord[];
  readonly states: readonly StateRecord[];
  readonly episodes: readonly EpisodeRecord[];
  readonly summary: Record<string, unknown>;
}

async function readLines(file: string, schema: MetaSchemaName, issues: Issue[]): Promise<Record<string, unknown>[]> {
  const text = await readFile(file, 'utf8');
  const out: Record<string, unknown>[] = [];
  text.split('\n').forEach((line, i) => {
    if (line === '') return;
    const record = JSON.parse(line) as Record<string, unknown>;
    for (const issue of validate(metaSchema(schema), record, `${path.basename(file)}:${i + 1}`)) issues.push(issue);
    out.push(record);
  });
  return out;
}

/** Read a whole (small) run folder into memory, validating every record; for large ones see openRunRewards and exportRun. */
export async function readRunFolder(dir: string): Promise<RunFolder> {
  const issues: Issue[] = [];
  const json = async (name: string, schema: MetaSchemaName): Promise<Record<string, unknown>> => {
    const doc = JSON.parse(await readFile(path.join(dir, name), 'utf8')) as Record<string, unknown>;
    issues.push(...validate(metaSchema(schema), doc, name));
    return doc;
  };
  const manifest = await json(RUN_FILES.manifest, 'run-manifest');
  const events = await readLines(path.join(dir, RUN_FILES.events), 'run-event', issues);
  const trajectories = (await readLines(path.join(dir, RUN_FILES.trajectories), 'trajectory-record', issues)) as unknown as TrajectoryRecord[];
  const rewards = (await readLines(path.join(dir, RUN_FILES.rewards), 'reward-log-record', issues)) as unknown as RewardLogRecord[];
  const states = (await readLines(path.join(dir, RUN_FILES.states), 'state-record', issues)) as unknown as StateRecord[];
  const episodes = (await readLines(path.join(dir, RUN_FILES.episodes), 'episode-record', issues)) as unknown as EpisodeRecord[];
  const summary = await json(RUN_FILES.summary, 'run-summary');
  if (issues.length > 0) throw new ValidationError('DEFINITION_INVALID', `run folder '${dir}' has invalid records`, issues, 'The writer and the schemas in schemas/ disagree.');
  return { manifest, events, trajectories, rewards, states, episodes, summary };
}
