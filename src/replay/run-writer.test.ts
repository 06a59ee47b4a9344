import { appendFile, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch } from '../../commands/testing.js';
import type { RunEvent, SettledStepEvent } from '../events/run-events.js';
import { RunWriter, trajectoryRecord } from './run-writer.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

describe('RunWriter', () => {
  it("writes each settled step's trajectory record, whatever the event's shape, taking its bulk from the event's line", async () => {
    const out = await tmp.dir('agent-writer-');
    const writer = await RunWriter.create(out, 'r "quoted"');
    const base = { type: 'trace_settled', time: 1_700_000_000_123, instance_id: 'ep-0', trace_id: 'ep-0:1', episode: 0, step: 1, action: 'get_weather', seq_before: 0, status: 'resolved', reward: 0.25, done: false, seq: 1, duration_ms: 3.1407540000000154 } as const;
    const steps: SettledStepEvent[] = [
      // As the env core builds it (scalars, params, observation, rewards), then the runner's offered actions.
      { ...base, params: { city: 'Zürich ,"params":' }, observation: { t: 14.6, s: '多云 "\\n' }, rewards: { ok: { status: 'arrived', value: 1, arrived_at: 2, delay_ms: 0 } }, available_actions: ['get_weather', 'say'] },
      // The user's side, a failed step, no observation, no offered actions.
      { ...base, trace_id: 'ep-0:2', step: 2, actor: 'user', status: 'failed', reward: 0, params: {}, rewards: {}, error: { code: 'TOOL_TIMEOUT', message: 'took "too" long', retryable: true } },
      // Another order (a lost call's, rebuilt on resume): serialized whole instead.
      { type: 'trace_settled', time: 5, instance_id: 'ep-1', trace_id: 'ep-1:1', episode: 1, step: 1, action: 'book', params: { id: 7 }, seq_before: 2, status: 'failed', reward: 0, rewards: {}, done: false, seq: 2, duration_ms: 0, available_actions: ['book'], error: { code: 'TOOL_LOST', message: 'in flight' } },
      // A key the record does not have after the params: serialized whole too.
      { ...base, trace_id: 'ep-0:3', params: {}, rewards: {}, extra: 1 } as SettledStepEvent,
    ];
    for (const step of steps) writer.write(step);
    await writer.finish({ ok: true });
    const lines = (await readFile(path.join(out, 'r "quoted"', 'trajectories.jsonl'), 'utf8')).trim().split('\n');
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual(steps.map((e) => JSON.parse(JSON.stringify(trajectoryRecord('r "quoted"', e))) as unknown));
    expect(lines[0]).toContain('"duration_ms":3.141,');
  });

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

