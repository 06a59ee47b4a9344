import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch } from '../../commands/testing.js';
import type { RunEvent } from '../run/run-events.js';
import { RunWriter } from './run-writer.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

describe('RunWriter', () => {
  it('never drops a record silently: one it cannot write is counted, with the reason, and the rest are kept', async () => {
    const out = await tmp.dir('agent-writer-');
    const writer = await RunWriter.create(out, 'r1');
    writer.write({ type: 'error', time: 1, instanceId: 'i', error: { code: 'INTERNAL', message: 'fine' } });
    writer.write({ type: 'error', time: 2, instanceId: 'i', error: { code: 'INTERNAL', message: 10n as unknown as string } } as RunEvent);
    writer.write({ type: 'error', time: 3, instanceId: 'i', error: { code: 'INTERNAL', message: 'also fine' } });
    await writer.finish({ ok: true });
    expect(writer.loss).toEqual({ records: 1, reason: expect.stringMatching(/^event 2 \(error\) is not JSON: TypeError: .*BigInt/) as unknown as string });
    const lines = (await readFile(path.join(out, 'r1', 'events.jsonl'), 'utf8')).trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { time: number }).time)).toEqual([1, 3]);
  });
});
