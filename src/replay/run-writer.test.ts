import { appendFile, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch } from '../../commands/testing.js';
import type { RunEvent } from '../events/run-events.js';
import { RunWriter } from './run-writer.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

describe('RunWriter', () => {
  it('never drops a record silently: one it cannot write is counted, with the reason, and the rest are kept', async () => {
    const out = await tmp.dir('agent-writer-');
    const writer = await RunWriter.create(out, 'r1');
    writer.write({ type: 'error', time: 1, instance_id: 'i', error: { code: 'INTERNAL', message: 'fine' } });
    writer.write({ type: 'error', time: 2, instance_id: 'i', error: { code: 'INTERNAL', message: 10n as unknown as string } } as RunEvent);
    writer.write({ type: 'error', time: 3, instance_id: 'i', error: { code: 'INTERNAL', message: 'also fine' } });
    await writer.finish({ ok: true });
    expect(writer.loss).toEqual({ records: 1, reason: expect.stringMatching(/^event 2 \(error\) is not JSON: TypeError: .*BigInt/) as unknown as string });
    const lines = (await readFile(path.join(out, 'r1', 'events.jsonl'), 'utf8')).trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { time: number }).time)).toEqual([1, 3]);
  });

  it('reopened (a resume), goes on numbering events where the folder stopped, cutting off a line torn by the crash', async () => {
    const out = await tmp.dir('agent-writer-reopen-');
    const error = (time: number, message = 'x'): RunEvent => ({ type: 'error', time, instance_id: 'i', error: { code: 'INTERNAL', message } });
    const first = await RunWriter.create(out, 'r2');
    // One event with a long line (longer than one read of the tail), then a short one.
    first.write(error(1, 'y'.repeat(200_000)));
    first.write(error(2));
    await first.finish({});
    const file = path.join(out, 'r2', 'events.jsonl');
    await appendFile(file, '{"event_seq":3,"type":"err');
    const second = await RunWriter.reopen(out, 'r2', {});
    second.write(error(3));
    await second.finish({});
    const lines = (await readFile(file, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { event_seq: number; time: number });
    expect(lines.map((l) => [l.event_seq, l.time])).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    // The long line ends the file: the tail is read back far enough to find it whole.
    const third = await RunWriter.reopen(out, 'r2', {});
    third.write(error(4, 'z'.repeat(300_000)));
    await third.finish({});
    const fourth = await RunWriter.reopen(out, 'r2', {});
    fourth.write(error(5));
    await fourth.finish({});
    expect((await readFile(file, 'utf8')).trim().split('\n').map((l) => (JSON.parse(l) as { event_seq: number }).event_seq)).toEqual([1, 2, 3, 4, 5]);
  });

  it('reopened, rewrites its logs beside them and swaps them in whole: never an emptied file, and a resume that dies midway changes nothing', async () => {
    const out = await tmp.dir('agent-writer-rewrite-');
    await (await RunWriter.create(out, 'r3')).finish({});
    const trajectories = path.join(out, 'r3', 'trajectories.jsonl');
    await writeFile(trajectories, '{"old": 1}\n');
    // A resume that stops before its rewrite is complete: the folder is as it was, nothing left beside it.
    const failed = await RunWriter.reopen(out, 'r3', {});
    expect(await readFile(trajectories, 'utf8')).toBe('{"old": 1}\n');
    await failed[Symbol.asyncDispose]();
    expect(await readFile(trajectories, 'utf8')).toBe('{"old": 1}\n');
    expect((await readdir(path.join(out, 'r3'))).filter((f) => f.startsWith('.'))).toEqual([]);
    // One that completes it: the old file is readable until the new one replaces it, whole.
    const resumed = await RunWriter.reopen(out, 'r3', {});
    expect(await readFile(trajectories, 'utf8')).toBe('{"old": 1}\n');
    await resumed.rewritten();
    expect(await readFile(trajectories, 'utf8')).toBe('');
    await resumed.finish({});
    expect((await readdir(path.join(out, 'r3'))).filter((f) => f.startsWith('.'))).toEqual([]);
  });
});

