/**
 * `curriculum.json` in a run folder: an `agent serve` run's statistics per task across its
 * rollouts requests (serve/task-curriculum.ts keeps it), read back on resume and by the web
 * console. Its schema: `schemas/curriculum.schema.json`.
 */
import { readFile } from 'node:fs/promises';
import { AgentError } from '../shared/errors.js';
import { SERVE_DEFAULTS } from '../shared/defaults.js';
import { validate } from '../schema/ajv.js';
import { metaSchema } from '../schema/meta-schemas.js';

/** The curriculum's file in a run folder. */
export const CURRICULUM_FILE = 'curriculum.json';
export const CURRICULUM_FORMAT = 1;

/** One task's statistics, as `curriculum.json` keeps them. */
export interface TaskStats {
  readonly episodes: number;
  readonly groups: number;
  readonly mean_reward: number;
  /** Its last episodes' outcomes, oldest first: 1 a success (reward ≥ the request's `success_reward`), 0 not. */
  readonly recent: readonly (0 | 1)[];
  /** The newest weight version among its last group's turns (null: none labelled). */
  readonly weight_version: number | null;
  readonly last_seen: number;
}

/** `curriculum.json`. */
export interface CurriculumFile {
  readonly format: typeof CURRICULUM_FORMAT;
  /** Tasks drawn so far: a request's sampler is seeded by it, so a resumed server draws on and does not repeat itself. */
  readonly draws: number;
  readonly tasks: Readonly<Record<string, TaskStats>>;
}

/**
 * A task's weight for the difficulty sampler, from its recent outcomes: 4·p·(1−p) for their
 * success rate p (most where the policy is undecided), at least the floor (a solved or hopeless
 * task still comes back now and then: the policy changes); 1 for a task never tried.
 */
export function difficultyWeight(recent: readonly (0 | 1)[]): number {
  if (recent.length === 0) return 1;
  const p = recent.reduce<number>((a, b) => a + b, 0) / recent.length;
  return Math.max(SERVE_DEFAULTS.curriculumFloor, 4 * p * (1 - p));
}

/** The curriculum kept in `file`; undefined when there is none yet. A damaged one is refused naming the file and the field. */
export async function readCurriculum(file: string): Promise<CurriculumFile | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  return parseCurriculum(text, file);
}

/** `curriculum.json`'s text, checked against its schema: a typed error naming the file and the field otherwise. */
export function parseCurriculum(text: string, file: string): CurriculumFile {
  const hint = 'The curriculum is rewritten after each rollouts group; move the file away to start it afresh.';
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new AgentError('RECORD_INVALID', `${file} is not JSON`, { hint });
  }
  const [issue] = validate(metaSchema('curriculum'), raw, file);
  if (issue) throw new AgentError('RECORD_INVALID', `${file}: ${issue.pointer || '/'} ${issue.message}`, { hint });
  return raw as CurriculumFile;
}
