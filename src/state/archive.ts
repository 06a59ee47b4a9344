/**
 * An archiver for trimmed history: the deltas a store removes are appended, before removal, to
 * `<dir>/<instance>.jsonl.gz`, one JSON line per delta. Each batch is its own gzip member, so
 * appending never rewrites what is there and `zcat` (or {@link readArchive}) reads the file whole.
 */
import { appendFile, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { AgentError, describeError } from '../shared/errors.js';
import type { Delta, StateStoreOptions } from './store.js';

const gz = promisify(gzip);
const gunz = promisify(gunzip);

/** File name of an instance's archive: its id, with what a file name cannot hold replaced. */
export function archiveFile(dir: string, instanceId: string): string {
  return path.join(dir, `${instanceId.replace(/[^\w.@-]/g, '_')}.jsonl.gz`);
}

/** `options.archive` for a StateStore: trimmed deltas go to compressed JSON lines in `dir`. */
export function archiveToFolder(dir: string): NonNullable<StateStoreOptions['archive']> {
  let ready: Promise<unknown> | undefined;
  return async (instanceId, deltas) => {
    ready ??= mkdir(dir, { recursive: true });
    await ready;
    const lines = deltas.map((d) => `${JSON.stringify({ instance_id: instanceId, seq: d.seq, time: d.time, patch: d.patch, ...(d.traceId ? { trace_id: d.traceId } : {}) })}\n`).join('');
    try {
      await appendFile(archiveFile(dir, instanceId), await gz(lines));
    } catch (err) {
      // Trimming waits on the archive: if it cannot be written, nothing is removed.
      throw new AgentError('BAD_USAGE', `cannot archive trimmed deltas of '${instanceId}' to ${dir}: ${describeError(err)}`, { cause: err, hint: 'Check that the archive folder is writable and has room.' });
    }
  };
}

/** The deltas archived for an instance, oldest first. */
export async function readArchive(dir: string, instanceId: string): Promise<Delta[]> {
  const file = archiveFile(dir, instanceId);
  const text = (await gunz(await readFile(file))).toString('utf8');
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      const r = JSON.parse(l) as { seq: number; time: number; patch: Delta['patch']; trace_id?: string };
      return r.trace_id ? { seq: r.seq, time: r.time, patch: r.patch, traceId: r.trace_id } : { seq: r.seq, time: r.time, patch: r.patch };
    });
}
