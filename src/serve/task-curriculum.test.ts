/** The curriculum: statistics per task, the samplers' draws, and its file read back as a resumed server would. */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CURRICULUM_FILE } from '../replay/curriculum-file.js';
import { TaskCurriculum, weightedIndex } from './task-curriculum.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});
async function scratchFile(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'curriculum-'));
  dirs.push(dir);
  return path.join(dir, CURRICULUM_FILE);
}

describe('TaskCurriculum', () => {
  it('keeps per-task statistics: episodes, groups, mean reward, the recent outcomes (a window), the newest version', async () => {
    const c = await TaskCurriculum.open();
    c.record('a', [1, 0], 1, 3, 100);
    c.record('a', [0.5, 1], 1, null, 200);
    expect(c.stats('a')).toEqual({ episodes: 4, groups: 2, mean_reward: 0.625, recent: [1, 0, 0, 1], weight_version: 3, last_seen: 200 });
    for (let i = 0; i < 20; i++) c.record('b', [1], 1, i, 300);
    expect(c.stats('b')?.recent).toHaveLength(16);
    expect(c.stats('c')).toBeUndefined();
  });

  it('weighs a task by how undecided the policy is on it: untried 1, half solved 1, solved or hopeless the floor', async () => {
    const c = await TaskCurriculum.open();
    c.record('half', [1, 0, 1, 0], 1, null, 0);
    c.record('solved', [1, 1], 1, null, 0);
    c.record('hopeless', [0, 0], 1, null, 0);
    c.record('mostly', [1, 1, 1, 0], 1, null, 0);
    expect([c.weight('new'), c.weight('half'), c.weight('solved'), c.weight('hopeless'), c.weight('mostly')]).toEqual([1, 1, 0.05, 0.05, 0.75]);
  });

  it('draws by those weights with the difficulty sampler (counts over many draws), and each task once a round with uniform', async () => {
    const c = await TaskCurriculum.open();
    c.record('half', [1, 0], 1, null, 0);
    c.record('solved', [1, 1], 1, null, 0);
    const counts = new Map<string, number>();
    const sampler = c.sampler(['half', 'solved', 'new'], 'difficulty');
    const draws = 20_500;
    for (let i = 0; i < draws; i++) {
      const id = sampler.next();
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    // Weights 1 : 0.05 : 1, so shares 0.4878 : 0.0244 : 0.4878.
    expect((counts.get('half') ?? 0) / draws).toBeCloseTo(0.4878, 1);
    expect((counts.get('new') ?? 0) / draws).toBeCloseTo(0.4878, 1);
    expect(Math.abs((counts.get('solved') ?? 0) / draws - 0.0244)).toBeLessThan(0.006);
    const uniform = c.sampler(['x', 'y', 'z', 'y'], 'uniform');
    const rounds = Array.from({ length: 4 }, () => [uniform.next(), uniform.next(), uniform.next()].sort());
    expect(rounds).toEqual(Array.from({ length: 4 }, () => ['x', 'y', 'z']));
    expect(c.snapshot().draws).toBe(draws + 12);
  });

  it('puts an item where its weight says', () => {
    expect([0, 0.24, 0.25, 0.99].map((u) => weightedIndex([1, 2, 1], u))).toEqual([0, 0, 1, 2]);
    expect(weightedIndex([0, 0, 1], 0)).toBe(2);
  });

  it('writes its state to the run folder and reads it back: a new sampler draws on from the saved count', async () => {
    const file = await scratchFile();
    const first = await TaskCurriculum.open(file);
    first.record('a', [1, 0], 1, 2, 50);
    const before = first.sampler(['a', 'b', 'c'], 'uniform');
    const drawn = [before.next(), before.next()];
    await first.flush();
    const again = await TaskCurriculum.open(file);
    expect(again.snapshot()).toEqual(first.snapshot());
    expect(again.snapshot().draws).toBe(2);
    // Seeded by the draw count: a resumed server does not start its sequence over.
    const fresh = await TaskCurriculum.open();
    const restarted = fresh.sampler(['a', 'b', 'c'], 'uniform');
    expect([restarted.next(), restarted.next()]).toEqual(drawn);
    const resumed = again.sampler(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'], 'uniform');
    const other = (await TaskCurriculum.open()).sampler(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'], 'uniform');
    expect(Array.from({ length: 8 }, () => resumed.next())).not.toEqual(Array.from({ length: 8 }, () => other.next()));
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ format: 1, draws: 2, tasks: { a: { episodes: 2, recent: [1, 0] } } });
  });

  it('refuses a damaged file naming it, and starts afresh when there is none', async () => {
    const file = await scratchFile();
    expect((await TaskCurriculum.open(file)).snapshot()).toEqual({ format: 1, draws: 0, tasks: {} });
    await writeFile(file, '{"format": 1, "draws": 2, "tasks": {"a": {"episodes": "many"}}}');
    await expect(TaskCurriculum.open(file)).rejects.toMatchObject({ code: 'RECORD_INVALID', message: expect.stringContaining(`${file}: /tasks/a`) });
  });
});
