import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch } from '../../commands/testing.js';
import { applyPatch, archiveToFolder, MemoryStateStore, readArchive, type JsonValue, type Patch } from '../index.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

describe('archiveToFolder', () => {
  it('keeps every trimmed delta in gzip JSON lines, appended batch by batch, from which the history replays', async () => {
    const dir = await tmp.dir('agent-archive-');
    const store = new MemoryStateStore({ snapshotEvery: 10, retainDeltas: 20, archive: archiveToFolder(dir) });
    let state: JsonValue = { n: 0 };
    const states: JsonValue[] = [state];
    await store.init('ep/1', state, 0);
    for (let i = 1; i <= 100; i++) {
      const patch: Patch = [{ op: 'replace', path: '/n', value: i }];
      state = applyPatch(state, patch);
      states.push(state);
      await store.append('ep/1', { patch, time: i, traceId: `t${i}` }, state);
    }
    const bounds = await store.bounds('ep/1');
    const archived = await readArchive(dir, 'ep/1');
    // Nothing lost: archived deltas and kept ones together are the whole history, in order.
    expect(archived.map((d) => d.seq)).toEqual(Array.from({ length: bounds?.oldestSeq ?? 0 }, (_, i) => i + 1));
    let replayed: JsonValue = states[0] as JsonValue;
    for (const d of archived) replayed = applyPatch(replayed, d.patch);
    expect(replayed).toEqual(states[bounds?.oldestSeq ?? 0]);
    expect(archived[0]).toEqual({ seq: 1, time: 1, patch: [{ op: 'replace', path: '/n', value: 1 }], traceId: 't1' });
    // Several batches were appended, and the file is plain gzip: zcat reads it whole.
    const lines = execFileSync('zcat', [path.join(dir, 'ep_1.jsonl.gz')], { encoding: 'utf8' }).trim().split('\n');
    expect(lines).toHaveLength(archived.length);
    expect(archived.length).toBeGreaterThan(60);
  });
});
