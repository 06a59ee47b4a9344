/**
 * One writer at a time on a run folder: an advisory lock file (`<run>/.lock`) holding the owner's
 * pid and host. Two `agent reward` processes on one folder each read the reward log, decide what
 * lands, and append: without the lock the second one's view is stale and a value is lost while
 * both say "landed". With it, the second waits, then reads the log the first has written.
 *
 * A lock whose pid no longer runs on this host (its owner was killed) is stale and taken over.
 * The take-over renames the file away first, so two processes that find the same stale lock
 * cannot both remove it; one that moved a lock that had just been taken by someone else puts it
 * back.
 */
import { randomBytes } from 'node:crypto';
import { link, open, readFile, rename, unlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sleep } from '../shared/abort.js';
import { AgentError } from '../shared/errors.js';
import { processAlive } from '../shared/process.js';

export const LOCK_FILE = '.lock';
const POLL_MS = 50;
/** A lock file that is still empty this long after it was seen is a writer that died between create and write. */
const EMPTY_STALE_MS = 2_000;

interface LockOwner {
  readonly pid: number;
  readonly host: string;
  readonly since: string;
}

async function readOwner(file: string): Promise<LockOwner | 'empty' | 'gone'> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    throw err;
  }
  try {
    const owner = JSON.parse(text) as Partial<LockOwner>;
    return typeof owner.pid === 'number' && typeof owner.host === 'string' ? { pid: owner.pid, host: owner.host, since: String(owner.since ?? '') } : 'empty';
  } catch {
    return 'empty';
  }
}

/** A lock held by a process that is gone. Another host's lock is never judged: its pid means nothing here. */
function stale(owner: LockOwner): boolean {
  return owner.host === os.hostname() && !processAlive(owner.pid);
}

/**
 * Take the run folder's lock, waiting up to `timeoutMs` (default 30 s) for another writer to
 * finish; disposing the result releases it. Refuses with `FOLDER_LOCKED`, naming the owner.
 */
export async function lockRunFolder(dir: string, options: { readonly timeoutMs?: number; readonly signal?: AbortSignal } = {}): Promise<AsyncDisposable> {
  const file = path.join(dir, LOCK_FILE);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const started = Date.now();
  const me: LockOwner = { pid: process.pid, host: os.hostname(), since: new Date().toISOString() };
  let emptySince: number | undefined;
  for (;;) {
    try {
      const handle = await open(file, 'wx', 0o644);
      try {
        await handle.writeFile(`${JSON.stringify(me)}\n`);
      } finally {
        await handle.close();
      }
      return { [Symbol.asyncDispose]: () => unlink(file).catch(() => undefined) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new AgentError('BAD_USAGE', `cannot lock ${dir}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { hint: 'The run folder must be writable by you.' });
    }
    const owner = await readOwner(file);
    if (owner === 'gone') continue;
    if (owner === 'empty') emptySince ??= Date.now();
    else emptySince = undefined;
    if ((owner !== 'empty' && stale(owner)) || (emptySince !== undefined && Date.now() - emptySince > EMPTY_STALE_MS)) {
      await takeOver(file);
      continue;
    }
    if (Date.now() - started >= timeoutMs) {
      const who = owner === 'empty' ? 'a process that is starting' : `pid ${owner.pid} on ${owner.host} since ${owner.since}`;
      throw new AgentError('FOLDER_LOCKED', `${dir} is locked by ${who}`, { hint: `Wait for that process to finish. If it is gone for good (another host's lock is never taken over), remove ${file}.` });
    }
    await sleep(POLL_MS, options.signal);
  }
}

async function takeOver(file: string): Promise<void> {
  const moved = `${file}.stale-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    await rename(file, moved);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const owner = await readOwner(moved);
  if (typeof owner === 'object' && !stale(owner)) {
    // Between our read and the rename, another process took the stale lock over: give it back.
    await link(moved, file).catch(() => undefined);
  }
  await unlink(moved).catch(() => undefined);
}
