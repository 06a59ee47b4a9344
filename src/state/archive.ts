/**
 * An archiver for trimmed history: the deltas a store removes are appended, before removal, to
 * `<dir>/<instance>.jsonl.gz`, one JSON line per delta. Each batch is its own gzip member, so
 * appending never rewrites what is there and `zcat` (or {@link readArchive}) reads the file whole.
 *
 * A process killed while appending leaves a torn last member. Its deltas are still in the store
 * (they are removed only once archived), so readers skip the torn member and the next append cuts
 * it off first: the batch is archived again, whole.
 */
import { existsSync } from 'node:fs';
import { appendFile, mkdir, readFile, truncate } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { gunzip, gzip, gzipSync, inflateRaw, type ZlibOptions } from 'node:zlib';
import { AgentError, describeError } from '../shared/errors.js';
import type { Delta } from './store.js';

const gz = promisify(gzip);
/**
 * Below this many characters a batch is compressed in this thread: zlib's trip through the thread
 * pool costs ~6× the CPU of compressing a finished episode's few KB itself (175 against 27 µs; a
 * distributed run's coordinator archives every episode). Larger batches (a trim of thousands of
 * deltas) still go to the pool, so the event loop is never held long.
 */
const COMPRESS_HERE_BELOW = 64 * 1024;
const gunz = promisify(gunzip);
/** One raw deflate stream from the start of `input`, and how many bytes of it the stream took. */
function inflateMember(input: Buffer): Promise<{ readonly text: Buffer; readonly consumed: number }> {
  return new Promise((resolve, reject) =>
    // With `info`, the callback gets the engine beside the output (the typings know only the output).
    inflateRaw(input, { info: true } as ZlibOptions, (err, result: unknown) => {
      if (err) return reject(err);
      const { buffer, engine } = result as { buffer: Buffer; engine: { bytesWritten: number } };
      resolve({ text: buffer, consumed: engine.bytesWritten });
    }),
  );
}

/** File name of an instance's archive: its id, with what a file name cannot hold replaced. */
export function archiveFile(dir: string, instanceId: string): string {
  return path.join(dir, `${instanceId.replace(/[^\w.@-]/g, '_')}.jsonl.gz`);
}

/** An archiver for one folder (a StateStore's `archive` option) that can also tell what it holds. */
export interface FolderArchiver {
  (instanceId: string, deltas: readonly Delta[]): Promise<void>;
  /**
   * The last seq archived for an instance (0 when nothing is). Its file is read once: a torn last
   * member (a crash mid-append) is cut off here, so the next append need not read it again.
   */
  lastSeq(instanceId: string): Promise<number>;
}

/** `options.archive` for a StateStore: trimmed deltas go to compressed JSON lines in `dir`. */
export function archiveToFolder(dir: string): FolderArchiver {
  let ready: Promise<unknown> | undefined;
  // Instances whose file this archiver has read and cut to its complete members (once each: it appends whole members).
  const checked = new Set<string>();
  /** The text of an instance's complete members ('' when it has no file), the file cut to them. */
  const repair = async (instanceId: string): Promise<string> => {
    const file = archiveFile(dir, instanceId);
    // Most instances have no archive yet: asked first, since a failed read builds an error (55 µs against 2).
    const content = existsSync(file) ? await readFile(file).catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? undefined : Promise.reject(err))) : undefined;
    let text = '';
    if (content) {
      const complete = await completeMembers(content, file);
      if (complete.end < content.length) await truncate(file, complete.end);
      text = complete.text;
    }
    checked.add(instanceId);
    return text;
  };
  const archive = async (instanceId: string, deltas: readonly Delta[]): Promise<void> => {
    ready ??= mkdir(dir, { recursive: true });
    await ready;
    const lines = deltas.map((d) => `${JSON.stringify({ instance_id: instanceId, seq: d.seq, time: d.time, patch: d.patch, ...(d.trace_id ? { trace_id: d.trace_id } : {}) })}\n`).join('');
    try {
      if (!checked.has(instanceId)) await repair(instanceId);
      await appendFile(archiveFile(dir, instanceId), lines.length < COMPRESS_HERE_BELOW ? gzipSync(lines) : await gz(lines));
    } catch (err) {
      // Trimming waits on the archive: if it cannot be written, nothing is removed.
      throw new AgentError('BAD_USAGE', `cannot archive trimmed deltas of '${instanceId}' to ${dir}: ${describeError(err)}`, { cause: err, hint: 'Check that the archive folder is writable and has room.' });
    }
  };
  return Object.assign(archive, {
    lastSeq: async (instanceId: string): Promise<number> => parseDeltas(await repair(instanceId), archiveFile(dir, instanceId)).at(-1)?.seq ?? 0,
  });
}

/** The deltas archived for an instance, oldest first (a torn last member, left by a crash, skipped). */
export async function readArchive(dir: string, instanceId: string): Promise<Delta[]> {
  const file = archiveFile(dir, instanceId);
  return parseDeltas((await completeMembers(await readFile(file), file)).text, file);
}

function parseDeltas(text: string, file: string): Delta[] {
  const deltas: Delta[] = [];
  for (const l of text.split('\n')) {
    if (l === '') continue;
    let r: { seq?: unknown; time?: unknown; patch?: unknown; trace_id?: unknown };
    try {
      r = JSON.parse(l) as typeof r;
    } catch {
      throw new AgentError('STATE_CORRUPT', `${file}: delta ${deltas.length + 1} is not JSON`, { hint: DAMAGED_HINT });
    }
    const previous = deltas[deltas.length - 1]?.seq;
    const expected = (previous ?? 0) + 1;
    if (typeof r !== 'object' || r === null || !Number.isInteger(r.seq) || typeof r.time !== 'number' || !Array.isArray(r.patch)) throw new AgentError('STATE_CORRUPT', `${file}: the delta after seq ${expected - 1} is not {seq, time, patch}`, { hint: DAMAGED_HINT });
    // Seqs run on by one (from where the history was first archived): a hole would replay to another state than the run had.
    if (previous !== undefined && r.seq !== expected) throw new AgentError('STATE_CORRUPT', `${file} has no delta for seq ${expected} (the next one is seq ${String(r.seq)})`, { hint: DAMAGED_HINT });
    const delta = { seq: r.seq as number, time: r.time, patch: r.patch as Delta['patch'] };
    deltas.push(typeof r.trace_id === 'string' ? Object.assign(delta, { trace_id: r.trace_id }) : delta);
  }
  return deltas;
}

const DAMAGED_HINT = 'More than a crash can do (it only cuts the last batch short): restore the file from a copy, or move it away to keep only the history the store still holds.';

/**
 * The text of the complete gzip members of an archive, and the offset where they end (before a
 * torn member, if any). The whole file at once when it is whole; else member by member, which
 * works for members as this module writes them: a 10-byte header without optional fields, a raw
 * deflate stream, an 8-byte trailer.
 */
async function completeMembers(content: Buffer, file: string): Promise<{ readonly text: string; readonly end: number }> {
  const damaged = (what: string): AgentError => new AgentError('STATE_CORRUPT', `${file} ${what}`, { hint: DAMAGED_HINT });
  try {
    return { text: (await gunz(content)).toString('utf8'), end: content.length };
  } catch (err) {
    // Cut short is what a crash mid-append leaves; any other damage is not a crash's doing.
    if (!isCutShort(err)) throw damaged(`is not a readable history archive: ${describeError(err)}`);
  }
  const parts: Buffer[] = [];
  let end = 0;
  while (content.length - end >= 10) {
    if (content[end] !== 0x1f || content[end + 1] !== 0x8b || content[end + 2] !== 8 || content[end + 3] !== 0) throw damaged(`has no gzip member of ours at byte ${end}`);
    let member: { readonly text: Buffer; readonly consumed: number };
    try {
      member = await inflateMember(content.subarray(end + 10));
    } catch (err) {
      if (isCutShort(err)) break;
      throw damaged(`is damaged at byte ${end}: ${describeError(err)}`);
    }
    const next = end + 10 + member.consumed + 8;
    if (next > content.length) break;
    parts.push(member.text);
    end = next;
  }
  return { text: Buffer.concat(parts).toString('utf8'), end };
}

const isCutShort = (err: unknown): boolean => (err as NodeJS.ErrnoException).code === 'Z_BUF_ERROR';
