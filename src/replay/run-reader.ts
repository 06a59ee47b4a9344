/** Reads a run folder back, validating every record against its schema in `schemas/`. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { validate } from '../schema/ajv.js';
import { metaSchema } from '../schema/meta-schemas.js';
import { ValidationError, type Issue } from '../shared/errors.js';
import { RUN_FILES, type TrajectoryRecord } from './run-writer.js';

export interface RunFolder {
  readonly events: readonly Record<string, unknown>[];
  readonly trajectories: readonly TrajectoryRecord[];
  readonly summary: Record<string, unknown>;
}

async function readLines(file: string, schema: 'run-event' | 'trajectory-record', issues: Issue[]): Promise<Record<string, unknown>[]> {
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

export async function readRunFolder(dir: string): Promise<RunFolder> {
  const issues: Issue[] = [];
  const events = await readLines(path.join(dir, RUN_FILES.events), 'run-event', issues);
  const trajectories = (await readLines(path.join(dir, RUN_FILES.trajectories), 'trajectory-record', issues)) as unknown as TrajectoryRecord[];
  const summary = JSON.parse(await readFile(path.join(dir, RUN_FILES.summary), 'utf8')) as Record<string, unknown>;
  issues.push(...validate(metaSchema('run-summary'), summary, RUN_FILES.summary));
  if (issues.length > 0) throw new ValidationError('DEFINITION_INVALID', `run folder '${dir}' has invalid records`, issues, 'The writer and the schemas in schemas/ disagree.');
  return { events, trajectories, summary };
}
