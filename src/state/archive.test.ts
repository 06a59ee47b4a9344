import { execFileSync } from 'node:child_process';
import { readFile, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch } from '../../commands/testing.js';
import { applyPatch, archiveToFolder, MemoryStateStore, readArchive, type JsonValue, type Patch } from '../internal.js';

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
      await store.append('ep/1', { patch, time: i, trace_id: `t${i}` }, state);
    }
    const bounds = await store.bounds('ep/1');
    const archived = await readArchive(dir, 'ep/1');
    // Nothing lost: archived deltas and kept ones together are the whole history, in order.
    expect(archived.map((d) => d.seq)).toEqual(Array.from({ length: bounds?.oldestSeq ?? 0 }, (_, i) => i + 1));
    let replayed: JsonValue = states[0] as JsonValue;
    for (const d of archived) replayed = applyPatch(replayed, d.patch);
    expect(replayed).toEqual(states[bounds?.oldestSeq ?? 0]);
    expect(archived[0]).toEqual({ seq: 1, time: 1, patch: [{ op: 'replace', path: '/n', value: 1 }], trace_id: 't1' });
    // Several batches were appended, and the file is plain gzip: zcat reads it whole.
    const lines = execFileSync('zcat', [path.join(dir, 'ep_1.jsonl.gz')], { encoding: 'utf8' }).trim().split('\n');
    expect(lines).toHaveLength(archived.length);
    expect(archived.length).toBeGreaterThan(60);
  });

  it('writes a large batch (compressed off the event loop) and small ones (compressed in it) into one file that reads back whole', async () => {
    const dir = await tmp.dir('agent-archive-sizes-');
    const archive = archiveToFolder(dir);
    const delta = (seq: number, text: string) => ({ seq, time: seq, patch: [{ op: 'add' as const, path: '/log/-', value: text }] });
    // Well over 64 KB of JSON lines in the middle batch.
    const batches = [[delta(1, 'a')], Array.from({ length: 300 }, (_, i) => delta(i + 2, 'x'.repeat(400))), [delta(302, 'b'), delta(303, 'c')]];
    for (const batch of batches) await archive('ep-9', batch);
    const archived = await readArchive(dir, 'ep-9');
    expect(archived.map((d) => d.seq)).toEqual(Array.from({ length: 303 }, (_, i) => i + 1));
    expect(archived[150]?.patch).toEqual([{ op: 'add', path: '/log/-', value: 'x'.repeat(400) }]);
    expect(execFileSync('zcat', [path.join(dir, 'ep-9.jsonl.gz')], { encoding: 'utf8' }).trim().split('\n')).toHaveLength(303);
    expect(await archive.lastSeq('ep-9')).toBe(303);
  });

  it('after a crash mid-append, reads the whole batches and cuts the torn one off before the next append', async () => {
    const delta = (seq: number) => ({ seq, time: seq, patch: [{ op: 'replace' as const, path: '/n', value: seq }] });
    // The process died while writing the second batch: 1 byte of its gzip member on disk, part of
    // the header, part of the deflate stream, all but the last byte of the trailer.
    for (const cut of [1, 9, 12, -1]) {
      const dir = await tmp.dir('agent-archive-torn-');
      const file = path.join(dir, 'ep-0.jsonl.gz');
      await archiveToFolder(dir)('ep-0', [delta(1), delta(2)]);
      const whole = (await readFile(file)).length;
      await archiveToFolder(dir)('ep-0', [delta(3), delta(4)]);
      await truncate(file, cut > 0 ? whole + cut : (await readFile(file)).length + cut);
      expect((await readArchive(dir, 'ep-0')).map((d) => d.seq)).toEqual([1, 2]);
      // Its deltas were still in the store, so they come again, and the file is whole gzip once more.
      const archive = archiveToFolder(dir);
      // What a run asks before archiving a finished episode: the last seq kept (the torn batch cut off here).
      expect(await archive.lastSeq('ep-0')).toBe(2);
      expect(execFileSync('zcat', [file], { encoding: 'utf8' }).trim().split('\n')).toHaveLength(2);
      await archive('ep-0', [delta(3), delta(4)]);
      await archive('ep-0', [delta(5)]);
      expect((await readArchive(dir, 'ep-0')).map((d) => d.seq)).toEqual([1, 2, 3, 4, 5]);
      expect(execFileSync('zcat', [file], { encoding: 'utf8' }).trim().split('\n')).toHaveLength(5);
    }
  });

  it('refuses a file that is damaged rather than cut short, naming it', async () => {
    const dir = await tmp.dir('agent-archive-bad-');
    await writeFile(path.join(dir, 'ep-0.jsonl.gz'), 'not gzip at all');
    await expect(readArchive(dir, 'ep-0')).rejects.toThrow(/ep-0\.jsonl\.gz is not a readable history archive/);
    await expect(archiveToFolder(dir).lastSeq('ep-0')).rejects.toThrow(/ep-0\.jsonl\.gz is not a readable history archive/);
    // An instance with nothing archived: 0, and no file made by asking.
    expect(await archiveToFolder(dir).lastSeq('ep-1')).toBe(0);
    await expect(readFile(path.join(dir, 'ep-1.jsonl.gz'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses a history with a hole or a delta of the wrong shape, naming the missing seq', async () => {
    const dir = await tmp.dir('agent-archive-hole-');
    const patch = [{ op: 'replace', path: '/n', value: 1 }] as Patch;
    await archiveToFolder(dir)('ep-0', [1, 2, 4].map((seq) => ({ seq, time: seq, patch })));
    await expect(readArchive(dir, 'ep-0')).rejects.toMatchObject({ code: 'STATE_CORRUPT', message: expect.stringMatching(/ep-0\.jsonl\.gz has no delta for seq 3 \(the next one is seq 4\)/) });
    const shape = await tmp.dir('agent-archive-shape-');
    await archiveToFolder(shape)('ep-0', [{ seq: 1, time: 1, patch: { not: 'a patch' } as unknown as Patch }]);
    await expect(readArchive(shape, 'ep-0')).rejects.toMatchObject({ code: 'STATE_CORRUPT', message: expect.stringContaining('is not {seq, time, patch}') });
  });
});

