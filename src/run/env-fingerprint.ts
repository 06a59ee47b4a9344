/**
 * What makes an env the env it is, as one short hash: every file of its folder that can change
 * what it does (the manifest, the schemas, the tools' sources, the data they read), by path and
 * content. A distributed run records its coordinator's; a worker whose env hashes otherwise (an
 * older deploy, another state schema) refuses the run's episodes instead of running them silently
 * with another env.
 *
 * Left out: what cannot change behaviour or changes by itself — hidden files and folders (`.git`,
 * `.venv`), installed dependencies (`node_modules`), bytecode caches, run folders written inside
 * the env (`runs/`), and documentation (`*.md`).
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

const SKIPPED_DIRS = new Set(['node_modules', '__pycache__', 'runs']);
const SKIPPED_FILE = /\.(md|pyc)$/i;

async function filesOf(root: string, rel = ''): Promise<string[]> {
  const entries = await readdir(path.join(root, rel), { withFileTypes: true });
  const out: string[] = [];
  for (const e of entries) {
    if (e.name.startsWith('.')) continue;
    const child = rel === '' ? e.name : `${rel}/${e.name}`;
    if (e.isDirectory()) {
      if (!SKIPPED_DIRS.has(e.name)) out.push(...(await filesOf(root, child)));
    } else if (e.isFile() && !SKIPPED_FILE.test(e.name)) out.push(child);
  }
  return out;
}

/** The env folder's fingerprint: 16 hex digits of a SHA-256 over its files' paths and contents, in path order. */
export async function envFingerprint(dir: string): Promise<string> {
  const hash = createHash('sha256');
  for (const file of (await filesOf(dir)).sort()) {
    const content = await readFile(path.join(dir, file));
    hash.update(`${file}\0${content.length}\0`).update(content);
  }
  return hash.digest('hex').slice(0, 16);
}
