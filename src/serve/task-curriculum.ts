/**
 * A served suite's curriculum: what each task's groups scored across rollouts requests (episodes,
 * mean reward, recent successes, the last weight version seen) and the samplers that draw a
 * request's tasks from its pool by them. `uniform` goes through the pool in a random order (each
 * task once before any twice); `difficulty` draws each task with a weight for how undecided the
 * policy is on it, 4·p·(1−p) for its recent success rate p (a task never tried weighs 1; a solved
 * or hopeless one keeps a small floor, as prime-rl's difficulty pools do), so groups land where
 * their rewards differ and GRPO has something to learn from. Its weights move as groups complete,
 * within a request too: a task whose group was all failures is less likely to be drawn again.
 *
 * The statistics and the draw count are kept in the run folder (`curriculum.json`, rewritten
 * whole, atomically, after each group): `agent serve --resume` draws on from where the run was.
 */
import { rename, writeFile } from 'node:fs/promises';
import { hashSeed, Rng } from '../shared/rng.js';
import { SERVE_DEFAULTS } from '../shared/defaults.js';
import { CURRICULUM_FORMAT, difficultyWeight, readCurriculum, type CurriculumFile, type TaskStats } from '../replay/curriculum-file.js';

/** Draws a request's tasks from its pool. */
export interface TaskSampler {
  next(): string;
}

export class TaskCurriculum {
  readonly #file: string | undefined;
  readonly #tasks: Map<string, TaskStats>;
  #draws: number;
  #writing: Promise<void> = Promise.resolve();
  #queued = false;

  private constructor(file: string | undefined, saved: CurriculumFile | undefined) {
    this.#file = file;
    this.#tasks = new Map(Object.entries(saved?.tasks ?? {}));
    this.#draws = saved?.draws ?? 0;
  }

  /** The curriculum kept in `file` (undefined: in memory only); a file that is there is read back (a resumed run). */
  static async open(file?: string): Promise<TaskCurriculum> {
    return new TaskCurriculum(file, file === undefined ? undefined : await readCurriculum(file));
  }

  stats(taskId: string): TaskStats | undefined {
    return this.#tasks.get(taskId);
  }

  snapshot(): CurriculumFile {
    return { format: CURRICULUM_FORMAT, draws: this.#draws, tasks: Object.fromEntries(this.#tasks) };
  }

  /** A task's weight for the difficulty sampler. */
  weight(taskId: string): number {
    return difficultyWeight(this.#tasks.get(taskId)?.recent ?? []);
  }

  /** A group of `taskId` is over: its episodes' rewards, and the newest weight version among its turns. */
  record(taskId: string, rewards: readonly number[], successReward: number, version: number | null, now: number): void {
    const was = this.#tasks.get(taskId);
    const episodes = (was?.episodes ?? 0) + rewards.length;
    const sum = (was ? was.mean_reward * was.episodes : 0) + rewards.reduce((a, b) => a + b, 0);
    const outcomes = rewards.map((r): 0 | 1 => (r >= successReward ? 1 : 0));
    this.#tasks.set(taskId, {
      episodes,
      groups: (was?.groups ?? 0) + 1,
      mean_reward: episodes === 0 ? 0 : Number((sum / episodes).toPrecision(12)),
      recent: [...(was?.recent ?? []), ...outcomes].slice(-SERVE_DEFAULTS.curriculumWindow),
      weight_version: version ?? was?.weight_version ?? null,
      last_seen: now,
    });
    this.#save();
  }

  /** A sampler over `pool` for one request (its `seed`: two requests made at once draw apart). */
  sampler(pool: readonly string[], kind: 'uniform' | 'difficulty', seed = 0): TaskSampler {
    const rng = new Rng(hashSeed('curriculum', this.#draws, seed));
    const tasks = [...new Set(pool)];
    let left: string[] = [];
    const draw = (): string => {
      if (kind === 'difficulty') return tasks[weightedIndex(tasks.map((id) => this.weight(id)), rng.next())] as string;
      if (left.length === 0) left = [...tasks];
      return left.splice(Math.floor(rng.next() * left.length), 1)[0] as string;
    };
    return {
      next: (): string => {
        this.#draws++;
        this.#save();
        return draw();
      },
    };
  }

  /** Resolves once what was recorded so far is on disk. */
  async flush(): Promise<void> {
    await this.#writing;
  }

  /** One write at a time, the latest state each: a burst of groups costs one or two writes, not one each. */
  #save(): void {
    const file = this.#file;
    if (file === undefined || this.#queued) return;
    this.#queued = true;
    this.#writing = this.#writing.then(async () => {
      this.#queued = false;
      const tmp = `${file}.tmp`;
      await writeFile(tmp, `${JSON.stringify(this.snapshot())}\n`);
      await rename(tmp, file);
    }).catch(() => undefined);
  }
}

/** The index `u` (uniform in [0, 1)) falls on when each item takes its weight's share. */
export function weightedIndex(weights: readonly number[], u: number): number {
  const total = weights.reduce((a, b) => a + b, 0);
  let at = u * total;
  for (let i = 0; i < weights.length; i++) {
    at -= weights[i] as number;
    if (at < 0) return i;
  }
  return weights.length - 1;
}
