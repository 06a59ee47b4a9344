/**
 * A workspace's files as the episode's state records them: each regular file's sha256 and size,
 * each link's target, by path relative to the workspace (sorted, `/`-separated). Model-written
 * code made these files: nothing here follows a link or opens anything but a regular file
 * (O_NOFOLLOW), so a link to a host file is recorded as a link, never read.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readdir, readlink } from 'node:fs/promises';
import path from 'node:path';

export type ListedFile = { readonly sha256: string; readonly size: number } | { readonly link: string };

export interface WorkspaceListing {
  readonly files: Readonly<Record<string, ListedFile>>;
  /** Set when the workspace held more than the listing keeps (MAX_LISTED entries). */
  readonly truncated?: true;
}

/** Entries kept: a command that makes a million files must not make a million-key state. */
export const MAX_LISTED = 10_000;

export async function listWorkspace(root: string, signal?: AbortSignal): Promise<WorkspaceListing> {
  const found: [string, ListedFile][] = [];
  let truncated = false;
  const walk = async (dir: string, rel: string): Promise<void> => {
    const names = (await readdir(dir).catch(() => [] as string[])).sort();
    for (const name of names) {
      signal?.throwIfAborted();
      if (found.length >= MAX_LISTED) {
        truncated = true;
        return;
      }
      const full = path.join(dir, name);
      const key = rel === '' ? name : `${rel}/${name}`;
      const info = await lstat(full).catch(() => undefined);
      if (!info) continue;
      if (info.isDirectory()) await walk(full, key);
      else if (info.isSymbolicLink()) found.push([key, { link: await readlink(full).catch(() => '') }]);
      else if (info.isFile()) {
        const hashed = await hashFile(full);
        if (hashed) found.push([key, hashed]);
      }
    }
  };
  await walk(root, '');
  found.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { files: Object.fromEntries(found), ...(truncated ? { truncated: true as const } : {}) };
}

async function hashFile(file: string): Promise<ListedFile | undefined> {
  // O_NOFOLLOW | O_NONBLOCK: a file swapped for a link (or a FIFO) since lstat is refused, not read or waited on.
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => undefined);
  if (!handle) return undefined;
  try {
    const info = await handle.stat();
    if (!info.isFile()) return undefined;
    const hash = createHash('sha256');
    let size = 0;
    for await (const chunk of handle.createReadStream({ autoClose: false })) {
      hash.update(chunk as Buffer);
      size += (chunk as Buffer).length;
    }
    return { sha256: hash.digest('hex'), size };
  } finally {
    await handle.close();
  }
}

/** Whether two listings say the same. */
export function sameListing(a: WorkspaceListing, b: WorkspaceListing): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Paths added, changed and removed from `before` to `after` (a step's changed files). */
export function changedFiles(before: WorkspaceListing | undefined, after: WorkspaceListing): { added: string[]; changed: string[]; removed: string[] } {
  const old = before?.files ?? {};
  const added: string[] = [];
  const changed: string[] = [];
  for (const [p, f] of Object.entries(after.files)) {
    const o = old[p];
    if (o === undefined) added.push(p);
    else if (JSON.stringify(o) !== JSON.stringify(f)) changed.push(p);
  }
  const removed = Object.keys(old).filter((p) => !(p in after.files));
  return { added, changed, removed };
}
