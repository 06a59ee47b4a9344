import { execa } from 'execa';
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { deliverToRunFolder, exportRun, FolderFeed, randomPolicy, Run, validate, type Policy } from '../src/internal.js';
import { metaSchema } from '../src/schema/meta-schemas.js';
import { runAgent, scratch } from './testing.js';

const tmp = scratch();
let env: string;
afterAll(() => tmp.cleanup());

const HOUR = 3_600_000;

beforeAll(async () => {
  env = await tmp.dir('agent-reward-env-');
  await writeFile(
    path.join(env, 'env.json'),
    JSON.stringify({
      state: { type: 'object', properties: { count: { type: 'integer' } } },
      actions: [
        { name: 'act', parameters: { type: 'object', properties: {} } },
        { name: 'fail', parameters: { type: 'object', properties: {} } },
      ],
      rewards: {
        type: 'object',
        properties: {
          speed: { type: 'number', delay_ms: 0 },
          human: { type: 'number', minimum: 0, maximum: 1, delay_ms: HOUR, deadline_ms: 2 * HOUR, fallback: { value: 0.25 }, weight: 2 },
          business: { type: 'number', delay_ms: 60_000, aggregation: 'mean' },
        },
      },
      initial_states: [{ count: 0 }],
      module: 'tools.mjs',
    }),
  );
  await writeFile(
    path.join(env, 'tools.mjs'),
    `export async function act(_p, ctx) {
  await new Promise((r) => setTimeout(r, 15));
  return { observation: 'ok', patch: [{ op: 'replace', path: '/count', value: ctx.state.count + 1 }], rewards: { speed: 1 } };
}
export async function fail() { throw Object.assign(new Error('no'), { retryable: false }); }
`,
  );
});

async function runFolder(extra: string[] = []): Promise<string> {
  const out = await tmp.dir('agent-reward-runs-');
  const r = await runAgent(['run', env, '--episodes', '2', '--max-steps', '3', '--seed', '3', '--out', out, ...extra]);
  expect(r.code, r.stderr).toBe(0);
  const dir = /run folder: (.*)/.exec(r.stdout)?.[1] as string;
  return dir;
}

async function rewardLines(dir: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(path.join(dir, 'rewards.jsonl'), 'utf8');
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('rewards delivered after the run', () => {
  it('agent reward lands a value once, by trace or by episode + step; a duplicate is a no-op; bad input writes nothing', async () => {
    const dir = await runFolder();
    const trajectories = (await readFile(path.join(dir, 'trajectories.jsonl'), 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { trace_id: string; status: string; episode: number; step: number });
    const ok = trajectories.filter((t) => t.status === 'resolved');
    const first = ok[0] as { trace_id: string; episode: number; step: number };
    const second = ok[1] as { trace_id: string; episode: number; step: number };

    let r = await runAgent(['reward', dir, '--trace', first.trace_id, '--source', 'human', '--value', '1']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`arrived\\s+human on ${first.trace_id}`));
    r = await runAgent(['reward', dir, '--trace', first.trace_id, '--source', 'human', '--value', '1']);
    expect(r.stdout).toContain('1 duplicate ignored');
    r = await runAgent(['reward', dir, '--episode', String(second.episode), '--step', String(second.step), '--source', 'business', '--value', '3', '--key', 'q1']);
    expect(r.stdout).toMatch(/1 landed \(1 in time/);

    const before = await rewardLines(dir);
    const feedback = path.join(dir, '..', 'feedback.jsonl');
    await writeFile(feedback, [JSON.stringify({ trace_id: second.trace_id, source: 'business', value: 5, key: 'q2' }), JSON.stringify({ trace_id: 'nope', source: 'human', value: 1 }), JSON.stringify({ trace_id: second.trace_id, source: 'human', value: 9 }), '{oops'].join('\n'));
    r = await runAgent(['reward', dir, '--file', feedback]);
    expect(r.code).toBe(2);
    expect(r.stdout).toContain('feedback.jsonl:2: /trace_id: no step has trace id "nope"');
    expect(r.stdout).toContain('feedback.jsonl:3: /value:');
    expect(r.stdout).toContain('feedback.jsonl:4: must be an object');
    expect(await rewardLines(dir)).toEqual(before);

    await writeFile(feedback, JSON.stringify({ trace_id: second.trace_id, source: 'business', value: 5, key: 'q2' }));
    expect((await runAgent(['reward', dir, '--file', feedback])).code).toBe(0);
    const lines = await rewardLines(dir);
    for (const l of lines) expect(validate(metaSchema('reward-log-record'), l)).toEqual([]);
    expect(lines.map((l) => [l['type'], l['source'], l['value']])).toEqual([
      ['reward_arrived', 'human', 1],
      ['reward_arrived', 'business', 3],
      ['reward_arrived', 'business', 5],
    ]);
    // Several values of one source combine by its aggregation (mean).
    const exported = await exportRun(dir);
    expect(exported.find((e) => e.trace_id === second.trace_id)?.rewards['business']).toMatchObject({ status: 'arrived', value: 4, count: 2 });
  });

  it('every exit ≠ 0 says why: no step named, a feedback file that is missing', async () => {
    const dir = await runFolder();
    let r = await runAgent(['reward', dir, '--source', 'human', '--value', '1']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('error: name the step: --trace, or --episode with --step or --time.');
    r = await runAgent(['reward', dir, '--file', path.join(dir, 'missing.jsonl')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/error: cannot read --file .*missing\.jsonl: ENOENT/);
  });

  it('two writers at once: one lands, the other sees it (a duplicate), never both "landed"', async () => {
    const dir = await runFolder();
    const trace = (await readFile(path.join(dir, 'trajectories.jsonl'), 'utf8')).split('\n').map((l) => (l ? (JSON.parse(l) as { trace_id: string; status: string }) : undefined)).find((t) => t?.status === 'resolved')?.trace_id as string;
    const [a, b] = await Promise.all([0.25, 0.75].map((value) => deliverToRunFolder(dir, [{ line: 1, delivery: { trace_id: trace, source: 'human', value } }])));
    expect([a?.landed[0]?.outcome, b?.landed[0]?.outcome].sort()).toEqual(['arrived', 'duplicate']);
    expect((await rewardLines(dir)).filter((l) => l['trace_id'] === trace && l['source'] === 'human')).toHaveLength(1);
  });

  it("takes over a dead writer's lock, and waits for a live one, naming it", async () => {
    const dir = await runFolder();
    const trace = (await readFile(path.join(dir, 'trajectories.jsonl'), 'utf8')).split('\n').map((l) => (l ? (JSON.parse(l) as { trace_id: string; status: string }) : undefined)).find((t) => t?.status === 'resolved')?.trace_id as string;
    const child = execa(process.execPath, ['-e', '']);
    const dead = child.pid as number;
    await child;
    await writeFile(path.join(dir, '.lock'), JSON.stringify({ pid: dead, host: os.hostname(), since: 'then' }));
    expect((await deliverToRunFolder(dir, [{ line: 1, delivery: { trace_id: trace, source: 'human', value: 1 } }])).landed[0]?.outcome).toBe('arrived');
    await writeFile(path.join(dir, '.lock'), JSON.stringify({ pid: process.pid, host: os.hostname(), since: 'now' }));
    await expect(deliverToRunFolder(dir, [], { lockTimeoutMs: 100 })).rejects.toMatchObject({ code: 'FOLDER_LOCKED', message: expect.stringContaining(`pid ${process.pid}`) });
  });

  it('a value delivered after the run shows in agent debug: --trace and the console index read the reward log too', async () => {
    const dir = await runFolder();
    const trace = (await readFile(path.join(dir, 'trajectories.jsonl'), 'utf8')).split('\n').map((l) => (l ? (JSON.parse(l) as { trace_id: string; status: string }) : undefined)).find((t) => t?.status === 'resolved')?.trace_id as string;
    await deliverToRunFolder(dir, [{ line: 1, delivery: { trace_id: trace, source: 'human', value: 0.75 } }]);
    const report = JSON.parse((await runAgent(['debug', dir, '--trace', trace, '--json'])).stdout) as { events: { type: string; detail?: { source?: string; value?: number } }[] };
    expect(report.events.filter((e) => e.type === 'reward_arrived').map((e) => e.detail)).toContainEqual({ source: 'human', value: 0.75 });
    // The live rewards (speed, from the tool) are there once each, not twice.
    expect(report.events.filter((e) => e.type === 'reward_arrived' && e.detail?.source === 'speed')).toHaveLength(1);
    const feed = await FolderFeed.open(dir, { follow: false });
    try {
      await vi.waitFor(() => expect(feed.status().phase).toBe('finished'));
      await vi.waitFor(() => expect(feed.index.trace(trace)?.rewards?.find((r) => r.source === 'human')).toMatchObject({ status: 'arrived', value: 0.75 }));
    } finally {
      await feed[Symbol.asyncDispose]();
    }
  });

  it('applies deadlines that passed after the run: the fallback is imputed and a later value is late beside it', async () => {
    const dir = await runFolder();
    const { landed } = await deliverToRunFolder(dir, [], { now: Date.now() + 3 * HOUR });
    expect(landed).toEqual([]);
    const imputed = (await rewardLines(dir)).filter((l) => l['type'] === 'reward_imputed');
    expect(imputed.length).toBeGreaterThan(0);
    expect(imputed.every((l) => l['source'] === 'human' && l['value'] === 0.25)).toBe(true);
    const trace = imputed[0]?.['trace_id'] as string;
    const report = await deliverToRunFolder(dir, [{ line: 1, delivery: { trace_id: trace, source: 'human', value: 1 } }], { now: Date.now() + 4 * HOUR });
    expect(report.landed[0]).toMatchObject({ outcome: 'late' });
    const [final] = (await exportRun(dir)).filter((e) => e.trace_id === trace);
    const [arrived] = (await exportRun(dir, { rewards: 'arrived' })).filter((e) => e.trace_id === trace);
    expect(final?.rewards['human']).toMatchObject({ status: 'late', value: 0.25, late_value: 1 });
    // speed 1 + 2 × human: the imputed 0.25 under `final`, the late 1 under `arrived`.
    expect(final?.reward).toBe(1.5);
    expect(arrived?.reward).toBe(3);
    const sla = await runAgent(['rewards', 'sla', dir, '--json']);
    expect(JSON.parse(sla.stdout)).toMatchObject({ human: { late: 1 }, business: { share_within_deadline: 0 } });
  });

  it('agent export writes trainer records: the state the policy saw, failed steps marked, returns-to-go; Parquet too', async () => {
    const dir = await runFolder();
    const r = await runAgent(['export', dir, '--gamma', '0.5']);
    const records = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const rec of records) expect(validate(metaSchema('export-record'), rec)).toEqual([]);
    const failed = records.filter((x) => x['status'] === 'failed');
    expect(failed.length).toBeGreaterThan(0);
    expect(failed.every((x) => x['reward'] === null && (x['patch'] as unknown[]).length === 0)).toBe(true);
    // By default a step carries the patch it committed, not the state: each act adds one to count.
    for (const rec of records.filter((x) => x['status'] === 'resolved')) {
      expect((rec['observation'] as { state?: unknown }).state).toBeUndefined();
      expect(rec['patch']).toEqual([{ op: 'replace', path: '/count', value: (rec['observation'] as { state_seq: number }).state_seq + 1 }]);
    }
    const full = (await runAgent(['export', dir, '--state', 'full'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const rec of full.filter((x) => x['status'] === 'resolved')) {
      const obs = rec['observation'] as { state: { count: number }; state_seq: number };
      // The state it was chosen on has count = state_seq.
      expect(obs.state.count).toBe(obs.state_seq);
      expect(rec['patch']).toBeUndefined();
    }
    const episode0 = records.filter((x) => x['episode'] === 0);
    const rewards = episode0.map((x) => (x['reward'] as number | null) ?? 0);
    expect(episode0[0]?.['return_to_go']).toBeCloseTo(rewards.reduce((acc, v, i) => acc + v * 0.5 ** i, 0));
    expect(episode0.at(-1)).toMatchObject({ truncated: true, terminated: false });

    const file = path.join(dir, 'steps.parquet');
    expect((await runAgent(['export', dir, '--format', 'parquet', '--out', file])).code).toBe(0);
    const { parquetReadObjects } = await import('hyparquet');
    const { asyncBufferFromFile } = await import('hyparquet');
    const rows = await parquetReadObjects({ file: await asyncBufferFromFile(file) });
    expect(rows.map((x) => [x['trace_id'], x['reward']])).toEqual(records.map((x) => [x['trace_id'], x['reward']]));
    // What varies by tool is JSON text decoded once (never a JSON string of a JSON string); a missing value is null, not "null".
    expect(rows.map((x) => JSON.parse(x['params_json'] as string) as unknown)).toEqual(records.map((x) => x['params']));
    expect(rows.map((x) => (x['result_json'] === null ? null : (JSON.parse(x['result_json'] as string) as unknown)))).toEqual(records.map((x) => x['result']));
    expect(rows.filter((x) => x['status'] === 'resolved').every((x) => x['error_code'] === null && x['state_json'] === null)).toBe(true);
  });

  it('takes rewards over POST /rewards while the run is live, and refuses agent reward on a live run', async () => {
    const out = await tmp.dir('agent-reward-live-');
    let refused: Promise<unknown> | undefined;
    // The run waits for the check below before its next step: the folder is checked while the run is live.
    const policy: Policy = async (observation, ctx) => (await refused, randomPolicy(observation, ctx));
    const run = await Run.prepare({ env, episodes: 2, maxSteps: 3, concurrency: 1, seed: 3, out, port: 0, policy });
    const posts: Promise<Response>[] = [];
    run.events.on('trace_settled', (e) => {
      if (posts.length > 0 || e.status !== 'resolved') return;
      const url = `${run.server?.url ?? ''}/rewards`;
      const headers = { authorization: `Bearer ${run.server?.token ?? ''}`, 'content-type': 'application/json' };
      posts.push(fetch(url, { method: 'POST', headers, body: JSON.stringify({ trace_id: e.trace_id, source: 'human', value: 0.5 }) }));
      posts.push(fetch(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/x-ndjson' }, body: `${JSON.stringify({ trace_id: e.trace_id, source: 'business', value: 1 })}\n${JSON.stringify({ trace_id: 'x', source: 'business', value: 1 })}` }));
      refused = deliverToRunFolder(run.dir as string, []).catch((err: unknown) => err);
    });
    await run.execute();
    const [ok, mixed] = await Promise.all(posts);
    expect(ok?.status).toBe(200);
    expect(await ok?.json()).toMatchObject({ results: [{ index: 0, ok: true, result: { outcome: 'arrived', source: 'human' } }] });
    expect(mixed?.status).toBe(400);
    expect(await mixed?.json()).toMatchObject({ results: [{ ok: true }, { ok: false, pointer: '/trace_id' }] });
    expect(await refused).toMatchObject({ code: 'BAD_USAGE', hint: expect.stringContaining('/rewards') });
    const lines = await rewardLines(run.dir as string);
    expect(lines.map((l) => [l['type'], l['source']])).toEqual([
      ['reward_arrived', 'human'],
      ['reward_arrived', 'business'],
    ]);
  });
});
