/** `agent export` (and the readers under it) on a hand-edited or damaged run folder: refuse with file and line, or skip and count with --lenient. */
import { cp, mkdir, readFile, readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAgent, scratch } from './testing.js';

const tmp = scratch();
let pristine: string;
afterAll(() => tmp.cleanup());

beforeAll(async () => {
  const out = await tmp.dir('export-damaged-');
  const r = await runAgent(['run', 'fixtures/weather', '--episodes', '2', '--max-steps', '4', '--seed', '1', '--out', out, '--tool-option', 'latency_scale=0.01']);
  expect(r.code, r.stderr).toBe(0);
  pristine = /run folder: (.*)/.exec(r.stdout)?.[1] as string;
});

/** A copy of the run folder with trajectories.jsonl's lines changed by `edit`. */
async function damaged(edit: (lines: string[]) => string[], file = 'trajectories.jsonl'): Promise<string> {
  const dir = path.join(await tmp.dir('damaged-'), 'run');
  await cp(pristine, dir, { recursive: true });
  const lines = (await readFile(path.join(dir, file), 'utf8')).split('\n').filter(Boolean);
  await writeFile(path.join(dir, file), `${edit(lines).join('\n')}\n`);
  return dir;
}

const edited = (lines: string[], i: number, f: (r: Record<string, unknown>) => void): string[] =>
  lines.map((l, k) => {
    if (k !== i) return l;
    const r = JSON.parse(l) as Record<string, unknown>;
    f(r);
    return JSON.stringify(r);
  });

describe('agent export on a damaged folder', () => {
  it('refuses, naming the file and line and what is wrong, and writes nothing', async () => {
    const cases: [string, (lines: string[]) => string[], RegExp][] = [
      ['a line twice', (l) => [...l.slice(0, 3), l[2] as string, ...l.slice(3)], /trajectories\.jsonl:4: episode \d step \d again \(first at line 3\)/],
      ['a line removed', (l) => l.filter((line) => !/"episode":0,/.test(line) || !/"step":2,/.test(line)), /trajectories\.jsonl:\d+: episode 0 has step 3 but no step 2/],
      ['a string reward', (l) => edited(l, 1, (r) => (r['reward'] = '0.5')), /trajectories\.jsonl:2: \/reward must be number/],
      ['no rewards', (l) => edited(l, 0, (r) => delete r['rewards']), /trajectories\.jsonl:1: \/rewards is required but missing/],
      ['a torn last line', (l) => [...l, '{"run_id":"x","epis'], /trajectories\.jsonl:\d+: not JSON/],
    ];
    for (const [what, edit, message] of cases) {
      const dir = await damaged(edit);
      const r = await runAgent(['export', dir]);
      expect(r.code, what).toBe(2);
      expect(r.stderr, what).toMatch(message);
      expect(r.stderr, what).toContain('--lenient');
      expect(r.stderr, what).not.toContain('internal error');
      expect(r.stdout, what).toBe('');
    }
  });

  it('with --lenient skips the bad records, counting them', async () => {
    const dir = await damaged((l) => [...edited(l, 1, (r) => (r['reward'] = 'high')), l[0] as string]);
    const r = await runAgent(['export', dir, '--lenient']);
    expect(r.code, r.stderr).toBe(0);
    // The bad reward, the repeated line, and the gap the skipped line leaves.
    expect(r.stderr).toMatch(/warning: skipped 3 bad records \(first: trajectories\.jsonl:2: \/reward must be number\)/);
    const all = (await readFile(path.join(pristine, 'trajectories.jsonl'), 'utf8')).split('\n').filter(Boolean).length;
    expect(r.stdout.trim().split('\n')).toHaveLength(all - 1);
  });

  it('a corrupt run.json is a typed error naming the file', async () => {
    const dir = await damaged((l) => l);
    await writeFile(path.join(dir, 'run.json'), '{"schema_version": 1, "run_id": ');
    let r = await runAgent(['export', dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/error: .*run\.json is not JSON/);
    await writeFile(path.join(dir, 'run.json'), JSON.stringify({ schema_version: 1, run_id: 'x' }));
    r = await runAgent(['rewards', 'sla', dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/error: .*run\.json: \/env is required but missing/);
  });
});

describe('agent export of text UTF-8 cannot encode', () => {
  it('puts U+FFFD for a lone surrogate in every format alike, and says how many and where', async () => {
    // A tool that cut its message in the middle of an emoji: half a UTF-16 pair, kept as an escape in the folder's JSON.
    const cut = 'rate limited \u{1F600}'.slice(0, -1);
    const dir = await damaged((l) =>
      edited(l, 1, (r) => {
        Object.assign(r, { status: 'failed', reward: 0, rewards: {}, observation: undefined, error: { code: 'TOOL_FAILED', message: cut } });
        (r['params'] as Record<string, unknown>)['note'] = cut;
      }),
    );
    const jsonl = await runAgent(['export', dir]);
    expect(jsonl.code, jsonl.stderr).toBe(0);
    const warning = /warning: 2 strings held a lone surrogate .*: exported with U\+FFFD in its place \(first: episode \d step \d at \/params\/note\)/;
    expect(jsonl.stderr).toMatch(warning);
    const records = jsonl.stdout.trim().split('\n').map((line) => JSON.parse(line) as { params: { note?: string }; error?: { message: string } });
    const at = records.findIndex((r) => r.params.note !== undefined);
    const step = records[at] as { params: { note: string }; error: { message: string } };
    expect(step.error.message).toBe('rate limited \uFFFD');
    expect(step.params.note).toBe('rate limited \uFFFD');

    const file = path.join(dir, 'steps.parquet');
    const parquet = await runAgent(['export', dir, '--format', 'parquet', '--out', file]);
    expect(parquet.stderr).toMatch(warning);
    const { asyncBufferFromFile, parquetReadObjects } = await import('hyparquet');
    const rows = (await parquetReadObjects({ file: await asyncBufferFromFile(file) })) as { error_message: string | null; params_json: string }[];
    expect(rows[at]?.error_message).toBe(step.error.message);
    // JSON text columns too: no escaped half pair that json.loads would turn back into one.
    expect(rows[at]?.params_json).not.toMatch(/\\ud83d/i);
    expect((JSON.parse(rows[at]?.params_json ?? '{}') as { note: string }).note).toBe(step.params.note);

    const chat = await runAgent(['export', dir, '--format', 'chat']);
    expect(chat.stderr).toMatch(/warning: 2 strings held a lone surrogate/);
    expect(chat.stdout).not.toMatch(/\\ud83d/i);
    expect(chat.stdout).toContain('rate limited \uFFFD');
  });
});

describe('agent export --out', () => {
  it('makes a missing folder (a fresh checkout has no runs/), for JSON lines and Parquet alike', async () => {
    const base = await tmp.dir('export-out-');
    for (const [format, file] of [['jsonl', 'a/b/steps.jsonl'], ['parquet', 'c/steps.parquet'], ['chat-parquet', 'd/e/chat.parquet']] as const) {
      const r = await runAgent(['export', pristine, '--format', format, '--out', path.join(base, file)]);
      expect(r.code, r.stderr).toBe(0);
      expect((await stat(path.join(base, file))).size, format).toBeGreaterThan(0);
    }
    const verl = await runAgent(['export', 'tau-bench/airline', '--format', 'verl', '--split', 'test', '--out', path.join(base, 'f', 'airline.verl.parquet')]);
    expect(verl.code, verl.stderr).toBe(0);
  });

  it('refuses a path no file can be written at, naming it, and writes nothing for a damaged folder', async () => {
    const base = await tmp.dir('export-out-bad-');
    await mkdir(path.join(base, 'a-folder'));
    await writeFile(path.join(base, 'a-file'), 'x');
    for (const [out, why] of [[path.join(base, 'a-folder'), 'it is a folder'], [path.join(base, 'a-file', 'steps.jsonl'), 'a part of its path is a file']] as const) {
      for (const format of ['jsonl', 'parquet']) {
        const r = await runAgent(['export', pristine, '--format', format, '--out', out]);
        expect(r.code, `${format} ${out}`).toBe(2);
        expect(r.stderr).toContain(`cannot write --out ${out}: ${why}`);
        expect(r.stderr).not.toContain('internal error');
      }
    }
    const dir = await damaged((l) => [...l, '{"torn'], 'trajectories.jsonl');
    for (const format of ['jsonl', 'parquet']) {
      const r = await runAgent(['export', dir, '--format', format, '--out', path.join(base, 'new', `x.${format}`)]);
      expect(r.code).toBe(2);
    }
    expect(await readdir(base)).toEqual(['a-file', 'a-folder']);
  });
});
