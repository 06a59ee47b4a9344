/**
 * Rollouts through `agent serve` against a fake vLLM server: a trainer asks for K episodes of some
 * tasks and gets each group once its episodes are over and the judge's late verdicts have landed,
 * as token records labelled with weight versions; stale groups are dropped or re-run and counted;
 * bad requests are refused naming the field; a cancelled request ends its episodes.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startFakeVllmServer } from '../llm/fake-vllm-server.js';
import { exportTokens, type TokenRecord } from '../replay/token-export.js';
import { serveEnv } from './serve.js';
import { ask, cleanUp, cleanups, connect, lookupModel, over, setup, type Message } from './rollouts-testing.js';

afterEach(cleanUp);

describe('rollouts through agent serve', () => {
  it('streams each task as a group of K token records once its late rewards landed, every turn labelled with its weight version', async () => {
    const { model, url } = await setup();
    const client = await connect(url);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { weight_version: 4, max_staleness: 1 }) });
    const messages = await client.until((m) => over(m, 1));
    const groups = messages.filter((m) => m.type === 'rollout_group').map((m) => m.data as { task_id: string; group_id: string; records: TokenRecord[]; staleness: number; weight_version: number });
    const done = messages[messages.length - 1] as Message;
    expect(messages[0]).toMatchObject({ type: 'rollouts_accepted', data: { tasks: 2, episodes: 6 } });
    expect(done.type).toBe('rollouts_done');
    expect(done.data).toMatchObject({ groups: 2, episodes: 6, dropped: 0, rerun: 0, max_staleness_seen: 0 });
    expect(groups.map((g) => g.task_id).sort()).toEqual(['lookup-train-0', 'lookup-train-1']);
    for (const g of groups) {
      expect(g.records).toHaveLength(3);
      expect(new Set(g.records.map((r) => r.group_id))).toEqual(new Set([g.group_id]));
      expect(g.records.map((r) => r.trial)).toEqual([0, 1, 2]);
      expect([g.weight_version, g.staleness]).toEqual([4, 0]);
      for (const r of g.records) {
        // The judge's verdict comes ~200 ms after the answer: it is in the record, on the answering turn.
        expect(r.reward).toBe(1);
        expect(r.turns.map((t) => t.reward)).toEqual([0, 1]);
        expect(r.turns.every((t) => t.weight_version === 4)).toBe(true);
        const generated = (i: number): boolean => r.turns.some((t) => i >= t.start && i < t.end);
        expect(r.loss_mask.every((m, i) => m === (generated(i) ? 1 : 0))).toBe(true);
        expect(r.logprobs.every((l, i) => (l === null) === !generated(i))).toBe(true);
      }
    }
    // Six episodes, two turns each, and the start-up check.
    expect(model.completions).toHaveLength(13);
  });

  it('runs each episode with the agent program a request names, when the server allows it: its turns exact, its groups as any', async () => {
    const refused = await setup();
    const plain = await connect(refused.url);
    const program = ['node', path.resolve('examples/agents/openai-tools.mjs')];
    plain.send({ type: 'rollouts', id: 1, data: ask(refused.model.url, { agent: { command: program } }) });
    const [error] = await plain.until((m) => m.id === 1);
    expect(error?.type).toBe('error');
    expect(JSON.stringify(error?.data)).toContain('--allow-agent-programs');

    const { model, url } = await setup({ reply: lookupModel }, { agentPrograms: true });
    const client = await connect(url);
    client.send({ type: 'rollouts', id: 2, data: ask(model.url, { n: 2, agent: { command: program } }) });
    const messages = await client.until((m) => over(m, 2));
    expect(messages[messages.length - 1]?.type).toBe('rollouts_done');
    const groups = messages.filter((m) => m.type === 'rollout_group').map((m) => m.data as { records: TokenRecord[] });
    expect(groups).toHaveLength(2);
    for (const r of groups.flatMap((g) => g.records)) {
      expect(r.turns.map((t) => t.reward)).toEqual([0, 1]);
      for (const t of r.turns) {
        const same = (a: readonly (number | null)[], b: readonly number[]): boolean => a.length === b.length && a.every((v, i) => v === b[i]);
        expect(model.completions.some((c) => same(r.input_ids.slice(0, t.start), c.prompt_token_ids) && same(r.input_ids.slice(t.start, t.end), c.token_ids))).toBe(true);
      }
    }

    // The request bounds its program: one model call per episode, so the answer it asks for next is refused.
    client.send({ type: 'rollouts', id: 3, data: ask(model.url, { task_ids: ['lookup-train-0'], n: 1, agent: { command: program, max_turns: 0 } }) });
    expect((await client.until((m) => m.id === 3))[0]?.data).toMatchObject({ code: 'PARAMS_INVALID', message: expect.stringContaining('/data/agent/max_turns') });
    client.send({ type: 'rollouts', id: 4, data: ask(model.url, { task_ids: ['lookup-train-0'], n: 1, agent: { command: program, max_turns: 1, timeout_s: 60 } }) });
    const bounded = (await client.until((m) => over(m, 4))).find((m) => m.type === 'rollout_group')?.data as { records: TokenRecord[] };
    expect(bounded.records.map((r) => [r.reason, r.truncated, r.turns.length])).toEqual([['max_turns', true, 1]]);
  });

  it("labels turns with the version the server reports, and drops or re-runs a group too many versions behind, counting it", async () => {
    let version = 0;
    const { model, url, dir, stop } = await setup({ reply: lookupModel, weightVersion: () => version });
    const client = await connect(url);
    client.send({ type: 'weight_version', id: 1, data: { version: 0 } });
    await client.until((m) => m.id === 1);
    // The trainer pushed version 3 while the server still generates with 0: every group is 3 behind.
    client.send({ type: 'weight_version', id: 2, data: { version: 3 } });
    await client.until((m) => m.id === 2);
    client.send({ type: 'rollouts', id: 3, data: ask(model.url, { max_staleness: 1, stale: 'drop' }) });
    const dropped = await client.until((m) => over(m, 3));
    expect(dropped.filter((m) => m.type === 'rollout_group')).toHaveLength(0);
    expect(dropped[dropped.length - 1]?.data).toMatchObject({ groups: 0, episodes: 6, dropped: 2, rerun: 0, max_staleness_seen: 3 });
    client.send({ type: 'rollouts', id: 4, data: ask(model.url, { task_ids: ['lookup-train-0'], max_staleness: 1 }) });
    const rerun = await client.until((m) => over(m, 4));
    expect(rerun[rerun.length - 1]?.data).toMatchObject({ groups: 0, episodes: 9, dropped: 1, rerun: 2 });
    // Once the server generates with the new weights, the group is fresh and sent.
    version = 3;
    client.send({ type: 'rollouts', id: 5, data: ask(model.url, { task_ids: ['lookup-train-0'], max_staleness: 1 }) });
    const fresh = await client.until((m) => over(m, 5));
    const group = fresh.find((m) => m.type === 'rollout_group')?.data as { staleness: number; records: TokenRecord[] };
    expect(group.staleness).toBe(0);
    expect(group.records.flatMap((r) => r.turns.map((t) => t.weight_version))).toEqual([3, 3, 3, 3, 3, 3]);
    // The stale groups' episodes stay in the folder, marked; an export has what the trainer was sent.
    await stop();
    const events = (await readFile(path.join(dir, 'events.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { type: string; then?: string; episodes?: number[]; staleness?: number });
    const discarded = events.filter((e) => e.type === 'rollout_discarded');
    expect(discarded.map((e) => [e.then, e.staleness, e.episodes?.length])).toEqual([['drop', 3, 3], ['drop', 3, 3], ['rerun', 3, 3], ['rerun', 3, 3], ['drop', 3, 3]]);
    const sent = group.records.map((r) => r.episode).sort((a, b) => a - b);
    expect((await exportTokens(dir)).map((r) => r.episode)).toEqual(sent);
  });

  it('keeps each socket’s weight versions its own: another trainer’s episodes on other weights do not move them', async () => {
    // B's trainer serves version 2 (slowly: its request is still running while A's runs); A's server is at 7.
    await using slow = await startFakeVllmServer({ reply: lookupModel, weightVersion: () => 2, delayMs: 150 });
    const { model, url } = await setup({ reply: lookupModel, weightVersion: () => 7 }, { inferenceUrls: [slow.url] });
    const a = await connect(url);
    const b = await connect(url);
    b.send({ type: 'weight_version', id: 1, data: { version: 2 } });
    await b.until((m) => m.id === 1);
    b.send({ type: 'rollouts', id: 2, data: ask(slow.url, { task_ids: ['lookup-train-0'], n: 2, max_staleness: 0, stale: 'drop' }) });
    a.send({ type: 'rollouts', id: 3, data: ask(model.url, { task_ids: ['lookup-train-1'], n: 2 }) });
    expect((await a.until((m) => over(m, 3))).at(-1)?.data).toMatchObject({ groups: 1 });
    // A's episodes at 7 did not make B's group, at 2, stale.
    expect((await b.until((m) => over(m, 2))).at(-1)?.data).toMatchObject({ groups: 1, dropped: 0, max_staleness_seen: 0 });
  });

  it('holds every new completion while paused and lets them go on resume: the turns after a weight push carry the new version, no episode rerun', async () => {
    let version = 0;
    const { model, url } = await setup({ reply: lookupModel, weightVersion: () => version });
    const client = await connect(url);
    client.send({ type: 'weight_version', id: 1, data: { version: 0 } });
    await client.until((m) => m.id === 1);
    client.send({ type: 'pause', id: 2 });
    expect((await client.until((m) => m.id === 2)).at(-1)).toMatchObject({ type: 'paused', data: { waiting: 0 } });
    const sentBefore = model.completions.length;
    client.send({ type: 'rollouts', id: 3, data: ask(model.url, { task_ids: ['lookup-train-0'], n: 2, max_staleness: 0, stale: 'drop' }) });
    // Both episodes reach their first turn and wait there; nothing goes to the server.
    let waiting = 0;
    for (let ask = 10; waiting < 2 && ask < 5_000; ask++) {
      client.send({ type: 'pause', id: ask });
      waiting = ((await client.until((m) => m.id === ask)).at(-1)?.data as { waiting: number }).waiting;
    }
    expect(waiting).toBe(2);
    // One completion only: the request's start-up probe of the server (token mode checks its routes), no turn.
    expect(model.completions.length).toBe(sentBefore + 1);
    // The trainer pushes its weights, declares them, resumes.
    version = 1;
    client.send({ type: 'weight_version', id: 4, data: { version: 1 } });
    await client.until((m) => m.id === 4);
    client.send({ type: 'resume', id: 5 });
    expect((await client.until((m) => m.id === 5)).at(-1)).toMatchObject({ type: 'resumed', data: { released: 2 } });
    const done = await client.until((m) => over(m, 3));
    const group = done.find((m) => m.type === 'rollout_group')?.data as { staleness: number; records: TokenRecord[] };
    expect(group.staleness).toBe(0);
    expect(group.records.flatMap((r) => r.turns.map((t) => t.weight_version))).toEqual([1, 1, 1, 1]);
    expect(done.at(-1)?.data).toMatchObject({ groups: 1, episodes: 2, dropped: 0, rerun: 0 });
  });

  it('refuses a bad request naming the field, and a version older than the current one, running nothing', async () => {
    const { model, url } = await setup();
    const client = await connect(url);
    const error = async (id: number, data: object, type = 'rollouts'): Promise<Record<string, unknown>> => {
      client.send({ type, id, data });
      const [m] = (await client.until((x) => x.id === id)).slice(-1);
      expect(m?.type).toBe('error');
      return m?.data ?? {};
    };
    expect(await error(1, ask(model.url, { task_ids: ['lookup-train-0', 'no-such-task'] }))).toMatchObject({ code: 'PARAMS_INVALID', message: expect.stringContaining('/data/task_ids/1') });
    expect(await error(2, ask(model.url, { n: 0 }))).toMatchObject({ code: 'PARAMS_INVALID', message: expect.stringContaining('/data/n') });
    expect(await error(3, ask(model.url, { sampling: { top_p: 2 } }))).toMatchObject({ message: expect.stringContaining('/data/sampling/top_p') });
    client.send({ type: 'weight_version', id: 4, data: { version: 5 } });
    await client.until((m) => m.id === 4);
    expect(await error(5, { version: 4 }, 'weight_version')).toMatchObject({ code: 'PARAMS_INVALID', message: expect.stringContaining('older than the current weight version 5') });
    expect(await error(6, ask(model.url, { weight_version: 2 }))).toMatchObject({ message: expect.stringContaining('older than the current weight version 5') });
    expect(await error(8, ask(model.url, { n: 2_000 }))).toMatchObject({ message: expect.stringContaining('/data/n must be a whole number from 1 to 1024') });
    expect(await error(9, ask(model.url, { concurrency: 5_000 }))).toMatchObject({ message: expect.stringContaining("/data/concurrency must be a whole number from 1 to 1024 (the server's --max-sessions)") });
    // The inference servers are the server's, fixed when it started: a client cannot point it elsewhere.
    expect(await error(7, ask('http://169.254.169.254/v1'))).toMatchObject({ code: 'PARAMS_INVALID', message: expect.stringContaining(`/data/base_url 'http://169.254.169.254/v1' is not an inference server this server may call (it may call '${model.url}')`) });
    expect(model.completions).toHaveLength(0);
  });

  it('uses the server’s own inference server when a request names none, and refuses rollouts on a server started with none', async () => {
    const { model, url } = await setup();
    const client = await connect(url);
    const { base_url: _unused, ...unnamed } = ask(model.url, { task_ids: ['lookup-train-0'], n: 1 }) as Record<string, unknown>;
    client.send({ type: 'rollouts', id: 1, data: unnamed });
    const done = await client.until((m) => over(m, 1));
    expect(done[done.length - 1]).toMatchObject({ type: 'rollouts_done', data: { groups: 1 } });

    const out = await mkdtemp(path.join(tmpdir(), 'rollouts-'));
    cleanups.push(() => rm(out, { recursive: true, force: true }));
    const controller = new AbortController();
    let ready!: (v: { url: string }) => void;
    const listening = new Promise<{ url: string }>((r) => (ready = r));
    const served = serveEnv({ env: 'fixtures/lookup', split: 'train', listen: 0, out, onListening: ready }, controller.signal);
    cleanups.push(() => {
      controller.abort();
      return served;
    });
    const bare = await connect((await listening).url);
    bare.send({ type: 'rollouts', id: 2, data: ask(model.url) });
    const refused = await bare.until((m) => over(m, 2));
    expect(refused[refused.length - 1]).toMatchObject({ type: 'error', data: { code: 'PARAMS_INVALID', message: expect.stringContaining('started with no inference server'), hint: expect.stringContaining('--llm-base-url') } });
  });

  it('streams the records agent export --format tokens makes of the same episodes from the run folder: one builder, one meaning', async () => {
    const { model, url, dir, stop } = await setup();
    const client = await connect(url);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { n: 2 }) });
    const messages = await client.until((m) => over(m, 1));
    const streamed = messages.filter((m) => m.type === 'rollout_group').flatMap((m) => (m.data as { records: TokenRecord[] }).records);
    await stop();
    const exported = new Map((await exportTokens(dir)).map((r) => [r.episode, r]));
    expect(streamed).toHaveLength(4);
    for (const r of streamed) {
      const e = exported.get(r.episode);
      expect(e, `episode ${r.episode}`).toBeDefined();
      const pick = (x: TokenRecord): object => ({ ids: x.input_ids, mask: x.loss_mask, logprobs: x.logprobs, turns: x.turns, reward: x.reward, reason: x.reason, terminated: x.terminated });
      expect(pick(e as TokenRecord), `episode ${r.episode}`).toEqual(pick(r));
    }
  });

  it('sends a group whose rewards never come once its wait runs out, saying which are missing', async () => {
    // The judge bound to an external source nobody posts to: its verdicts never come.
    const { model, url } = await setup(undefined, { rewardSources: { judge: { external: {} } } });
    const client = await connect(url);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { task_ids: ['lookup-train-0'], n: 2, reward_wait_s: 0.2 }) });
    const messages = await client.until((m) => over(m, 1));
    const group = messages.find((m) => m.type === 'rollout_group')?.data as { records: TokenRecord[]; missing: { episode: number; trace_id: string; source: string }[] };
    // Both steps of each episode (the lookup and the answer) await the external judge.
    expect(group.missing.map((m) => m.source)).toEqual(['judge', 'judge', 'judge', 'judge']);
    expect(new Set(group.missing.map((m) => m.trace_id)).size).toBe(4);
    expect(new Set(group.missing.map((m) => m.episode))).toEqual(new Set(group.records.map((r) => r.episode)));
    expect(group.records.map((r) => r.reward)).toEqual([0, 0]);
    expect(messages[messages.length - 1]).toMatchObject({ type: 'rollouts_done', data: { groups: 1 } });
    client.send({ type: 'rollouts', id: 2, data: ask(model.url, { reward_wait_s: 0 }) });
    const refused = await client.until((m) => over(m, 2));
    expect(refused[refused.length - 1]).toMatchObject({ type: 'error', data: { code: 'PARAMS_INVALID', message: expect.stringContaining('/data/reward_wait_s') as unknown } });
  });

  it('fails only the groups whose episodes ended before their first model turn, saying why; the next request runs', async () => {
    // A context too short for the first prompt: every episode ends before its first turn.
    const tiny = await startFakeVllmServer({ reply: lookupModel, maxModelLen: 64 });
    cleanups.push(async () => tiny[Symbol.asyncDispose]());
    const { model, url } = await setup(undefined, { inferenceUrls: [tiny.url] });
    const client = await connect(url);
    client.send({ type: 'rollouts', id: 1, data: ask(tiny.url, { n: 2 }) });
    const messages = await client.until((m) => over(m, 1));
    expect(messages.filter((m) => m.type === 'rollout_group')).toEqual([]);
    const done = messages[messages.length - 1] as Message;
    expect(done).toMatchObject({ type: 'rollouts_done', data: { groups: 0, episodes: 4, failed: 2 } });
    const failures = done.data['failures'] as { task_id: string; reason: string; error?: { code: string } }[];
    expect(failures.map((f) => f.task_id).sort()).toEqual(['lookup-train-0', 'lookup-train-0', 'lookup-train-1', 'lookup-train-1']);
    expect(failures[0]).toMatchObject({ reason: 'context_limit', error: { code: 'CONTEXT_LIMIT' } });
    client.send({ type: 'rollouts', id: 2, data: ask(model.url, { n: 1 }) });
    const after = await client.until((m) => over(m, 2));
    expect(after[after.length - 1]).toMatchObject({ type: 'rollouts_done', data: { groups: 2, failed: 0, failures: [] } });
  });

  it('ends the episodes of a cancelled request client_closed, and keeps serving', async () => {
    const { model, url, dir, stop } = await setup({ reply: lookupModel, delayMs: 20 });
    const client = await connect(url);
    client.send({ type: 'rollouts', id: 1, data: ask(model.url, { n: 4 }) });
    await vi.waitFor(() => expect(model.completions.length).toBeGreaterThan(2), { interval: 5 });
    client.send({ type: 'cancel', id: 2, data: { id: 1 } });
    const messages = await client.until((m) => over(m, 1));
    expect(messages[messages.length - 1]).toMatchObject({ type: 'error', data: { code: 'INTERRUPTED' } });
    client.send({ type: 'rollouts', id: 3, data: ask(model.url, { task_ids: ['lookup-train-2'], n: 1 }) });
    const after = await client.until((m) => over(m, 3));
    expect(after[after.length - 1]?.data).toMatchObject({ groups: 1 });
    const summary = await stop();
    expect(summary.episodes.by_reason.client_closed).toBeGreaterThan(0);
    expect(summary.episodes.by_reason.done).toBeGreaterThanOrEqual(1);
    const episodes = (await readFile(path.join(dir, 'episodes.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { reason: string });
    expect(episodes.filter((e) => e.reason === 'client_closed')).toHaveLength(summary.episodes.by_reason.client_closed ?? 0);
  });
});
