/**
 * Dynamic sampling on the rollouts service: groups whose rewards teach GRPO nothing are filtered
 * and counted, a request for N groups from a pool replaces them by new draws until N are sent,
 * over-sampling cancels the surplus, and a weight update in the middle of a group's episodes leaves
 * its turns on two versions, its staleness counted from the turn the request chose.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { exportTokens, type TokenRecord } from '../replay/token-export.js';
import { ask, cleanUp, connect, lookupModel, over, setup, type Message } from './rollouts-testing.js';
import { CURRICULUM_FILE, type CurriculumFile } from '../replay/curriculum-file.js';

afterEach(cleanUp);

/** The train split's first keys: tasks 0 to 5. */
const KEYS = ['keen-elk', 'misty-fox', 'coral-ant', 'dusky-cod', 'silver-fox', 'quiet-ram'];
const task = (i: number): string => `lookup-train-${i}`;

/** Answers right on the keys of `solid` (a group of equal rewards); on the others, every second answer is wrong (a group of 1 and 0). */
function mixedModel(solid: readonly number[]): (prompt: string) => string {
  const answers = new Map<string, number>();
  return (prompt) => {
    const said = lookupModel(prompt);
    const key = [...prompt.matchAll(/the key '([a-z-]+)'/g)].pop()?.[1] ?? '';
    if (!said.includes('"answer"') || solid.some((i) => KEYS[i] === key)) return said;
    const n = answers.get(key) ?? 0;
    answers.set(key, n + 1);
    return n % 2 === 0 ? said : said.replace(/"code": "\w+"/, '"code": "WRONG"');
  };
}

interface Group {
  readonly task_id: string;
  readonly group_id: string;
  readonly records: TokenRecord[];
  readonly staleness: number | null;
  readonly weight_versions: number[];
  readonly reruns: number;
}
const groupsOf = (messages: readonly Message[]): Group[] => messages.filter((m) => m.type === 'rollout_group').map((m) => m.data as unknown as Group);

async function discarded(dir: string): Promise<{ task_id: string; reason: string; then: string; episodes: number[] }[]> {
  const events = (await readFile(path.join(dir, 'events.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { type: string; task_id: string; reason: string; then: string; episodes: number[] });
  return events.filter((e) => e.type === 'rollout_discarded');
}

describe('dynamic sampling', () => {
  it('leaves out a group whose rewards are all equal, and one whose mean is out of range, counting each and marking its episodes', async () => {
    const { model, url, dir, stop } = await setup({ reply: mixedModel([0]) });
    const client = await connect(url);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { task_ids: [task(0), task(3)], n: 2, filter: 'zero_variance' }) });
    const first = await client.until((m) => over(m, 1));
    expect(groupsOf(first).map((g) => [g.task_id, g.records.map((r) => r.reward).sort()])).toEqual([[task(3), [0, 1]]]);
    expect(first.at(-1)).toMatchObject({ type: 'rollouts_done', data: { groups: 1, episodes: 4, filtered: { zero_variance: 1, reward_range: 0 }, tried: 2, surplus: 0 } });
    // Task 0's mean is 1, task 4's 0.5: above max_reward 0.75 is left out.
    client.send({ type: 'rollouts', id: 2, data: ask(model.url, { task_ids: [task(0), task(4)], n: 2, max_reward: 0.75 }) });
    const second = await client.until((m) => over(m, 2));
    expect(groupsOf(second).map((g) => g.task_id)).toEqual([task(4)]);
    expect(second.at(-1)?.data).toMatchObject({ groups: 1, filtered: { zero_variance: 0, reward_range: 1 } });
    // Eight episodes of two turns, and one start-up check of the server: the second request did not probe it again.
    expect(model.completions).toHaveLength(17);
    await stop();
    expect((await discarded(dir)).map((e) => [e.task_id, e.reason, e.then, e.episodes.length])).toEqual([
      [task(0), 'zero_variance', 'drop', 2],
      [task(0), 'reward_range', 'drop', 2],
    ]);
    // What was left out is not exported either: the export is what the trainer got.
    const sent = [...groupsOf(first), ...groupsOf(second)].flatMap((g) => g.records.map((r) => r.episode));
    expect((await exportTokens(dir)).map((r) => r.episode).sort((a, b) => a - b)).toEqual(sent.sort((a, b) => a - b));
  });

  it('draws N groups from a pool, replacing each filtered one by another draw until N are sent; the curriculum keeps what each task scored', async () => {
    const { model, url, dir, stop } = await setup({ reply: mixedModel([0, 1, 2]) });
    const client = await connect(url);
    const pool = [0, 1, 2, 3, 4, 5].map(task);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { task_ids: pool, groups: 3, n: 2, filter: 'zero_variance', concurrency: 2 }) });
    const messages = await client.until((m) => over(m, 1));
    expect(messages[0]).toMatchObject({ type: 'rollouts_accepted', data: { tasks: 6, groups: 3, episodes: 6 } });
    const groups = groupsOf(messages);
    // Uniform draws go through the pool once before any task comes twice: all six are tried.
    expect(groups.map((g) => g.task_id).sort()).toEqual([task(3), task(4), task(5)]);
    const done = messages.at(-1)?.data as { groups: number; tried: number; episodes: number; filtered: { zero_variance: number }; surplus: number };
    // The three sent, and as many solved tasks as were drawn before the last of them (the draw order is the sampler's).
    expect(done.filtered.zero_variance).toBeGreaterThan(0);
    expect(done).toMatchObject({ groups: 3, tried: 3 + done.filtered.zero_variance, episodes: 2 * (3 + done.filtered.zero_variance), surplus: 0 });
    expect((await discarded(dir)).map((e) => [e.reason, e.then])).toEqual(Array.from({ length: done.filtered.zero_variance }, () => ['zero_variance', 'replace']));
    // The curriculum, in the run folder: every group tried, its outcomes.
    await stop();
    const curriculum = JSON.parse(await readFile(path.join(dir, CURRICULUM_FILE), 'utf8')) as CurriculumFile;
    expect(curriculum.draws).toBe(done.tried);
    const recent = Object.entries(curriculum.tasks).map(([id, t]) => [id, t.recent.join('')]);
    expect(recent).toHaveLength(done.tried);
    expect(recent.filter(([, r]) => r === '11')).toHaveLength(done.filtered.zero_variance);
    expect(recent.filter(([, r]) => r === '10').map(([id]) => id).sort()).toEqual([task(3), task(4), task(5)]);
  });

  it('ends short when max_tries run out, saying how many were tried; the difficulty sampler then stays off the solved tasks', async () => {
    const { model, url } = await setup({ reply: mixedModel([0, 1, 2, 3, 4, 5]) });
    const client = await connect(url);
    const pool = [0, 1, 2, 3, 4, 5].map(task);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { task_ids: pool, groups: 2, n: 2, filter: 'zero_variance', max_tries: 4 }) });
    const messages = await client.until((m) => over(m, 1));
    expect(groupsOf(messages)).toEqual([]);
    expect(messages.at(-1)).toMatchObject({ type: 'rollouts_done', data: { groups: 0, tried: 4, filtered: { zero_variance: 4 } } });
    // Four solved tasks weigh 0.05 each, the two untried 1: the difficulty sampler's draws go there first.
    client.send({ type: 'rollouts', id: 2, data: ask(model.url, { task_ids: pool, groups: 1, n: 2, max_tries: 1, sampler: 'difficulty' }) });
    const tried = groupsOf(await client.until((m) => over(m, 2)));
    expect(tried).toHaveLength(1);
    const first = new Set(groupsOf(messages).map((g) => g.task_id));
    expect(first.has(tried[0]?.task_id ?? '')).toBe(false);
  });

  it('over-samples and cancels the surplus once N groups are in: never one group more than asked, the surplus episodes marked', async () => {
    const { model, url, dir, stop } = await setup({ reply: mixedModel([]), delayMs: 30 });
    const client = await connect(url);
    const pool = [3, 4, 5].map(task);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { task_ids: pool, groups: 1, n: 2, oversample: 3 }) });
    const messages = await client.until((m) => over(m, 1));
    const groups = groupsOf(messages);
    expect(groups).toHaveLength(1);
    expect(messages.at(-1)?.data).toMatchObject({ groups: 1, tried: 3, surplus: 2 });
    await stop();
    const surplus = (await discarded(dir)).filter((e) => e.reason === 'surplus');
    expect(surplus).toHaveLength(2);
    expect(surplus.every((e) => e.episodes.length > 0 && e.then === 'drop')).toBe(true);
    expect((await exportTokens(dir)).map((r) => r.episode).sort()).toEqual((groups[0]?.records ?? []).map((r) => r.episode).sort());
  });

  it('refuses draw and filter fields that make no sense, naming them', async () => {
    const { model, url } = await setup();
    const client = await connect(url);
    const refused = async (id: number, extra: object): Promise<unknown> => {
      client.send({ type: 'rollouts', id, data: ask(model.url, extra) });
      return (await client.until((m) => m.id === id)).at(-1)?.data;
    };
    expect(await refused(1, { oversample: 2 })).toMatchObject({ code: 'PARAMS_INVALID', message: expect.stringContaining('/data/oversample applies to a request that draws its tasks') });
    expect(await refused(2, { groups: 0 })).toMatchObject({ message: expect.stringContaining('/data/groups must be a whole number from 1') });
    expect(await refused(3, { groups: 2, oversample: 9 })).toMatchObject({ message: expect.stringContaining('/data/oversample must be a number from 1 to 4') });
    expect(await refused(4, { groups: 4, max_tries: 3 })).toMatchObject({ message: expect.stringContaining('/data/max_tries must be a whole number ≥ 4') });
    expect(await refused(5, { min_reward: 1, max_reward: 0 })).toMatchObject({ message: expect.stringContaining('/data/max_reward (0) is below min_reward (1)') });
    expect(await refused(6, { filter: 'low_variance' })).toMatchObject({ message: expect.stringContaining('/data/filter must be "zero_variance" or "none"') });
    expect(await refused(7, { groups: 2, sampler: 'hard' })).toMatchObject({ message: expect.stringContaining('/data/sampler must be "uniform" or "difficulty"') });
    expect(await refused(8, { staleness_from: 'middle' })).toMatchObject({ message: expect.stringContaining('/data/staleness_from must be "oldest" or "newest"') });
    expect(model.completions).toHaveLength(0);
  });
});

describe('partial rollouts across a weight update', () => {
  it("keeps each turn's version: a group whose episodes crossed an update carries two, fresh when counted from its newest turn, stale from its oldest", async () => {
    let version = 0;
    // The inference server takes the new weights between each episode's first and second turn.
    const reply = (prompt: string): string => {
      version = prompt.includes('<tool_response>') ? 1 : 0;
      return lookupModel(prompt);
    };
    const { model, url } = await setup({ reply, weightVersion: () => version });
    const client = await connect(url);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { task_ids: [task(0)], n: 2, max_staleness: 0, staleness_from: 'newest', stale: 'drop' }) });
    const fresh = await client.until((m) => over(m, 1));
    const [group] = groupsOf(fresh);
    expect(group).toMatchObject({ weight_versions: [0, 1], staleness: 0, reruns: 0 });
    for (const r of group?.records ?? []) expect(r.turns.map((t) => t.weight_version)).toEqual([0, 1]);
    expect(fresh.at(-1)?.data).toMatchObject({ groups: 1, dropped: 0, rerun: 0 });
    // Counted from its oldest turn (the default), the same group is one version behind: dropped.
    client.send({ type: 'rollouts', id: 2, data: ask(model.url, { task_ids: [task(0)], n: 2, max_staleness: 0, stale: 'drop' }) });
    expect((await client.until((m) => over(m, 2))).at(-1)?.data).toMatchObject({ groups: 0, dropped: 1, max_staleness_seen: 1 });
  });
});
