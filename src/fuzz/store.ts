/**
 * Failing cases are kept under `.agent-fuzz/<env>/<signature>.json` and replayed first on the next
 * run, so a fixed bug is shown as fixed (and its file removed) and a regression shows at once.
 */
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Failure, FuzzCase } from './case.js';

export interface SavedCase {
  readonly signature: string;
  readonly failure: Failure;
  /** The shrunk case: what to replay. */
  readonly case: FuzzCase;
  readonly original: FuzzCase;
  readonly first_seen: string;
}

export function caseFile(storeDir: string, envName: string, signature: string): string {
  return path.join(storeDir, envName, `${signature.replace(/[^A-Za-z0-9_.-]+/g, '_')}.json`);
}

export async function loadSaved(storeDir: string, envName: string): Promise<{ file: string; saved: SavedCase }[]> {
  const dir = path.join(storeDir, envName);
  const names = await readdir(dir).catch(() => [] as string[]);
  const out: { file: string; saved: SavedCase }[] = [];
  for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
    const file = path.join(dir, name);
    try {
      out.push({ file, saved: JSON.parse(await readFile(file, 'utf8')) as SavedCase });
    } catch {
      // A file we cannot read is not a case; leave it for the user to look at.
    }
  }
  return out;
}

export async function saveCase(storeDir: string, envName: string, saved: SavedCase): Promise<string> {
  const file = caseFile(storeDir, envName, saved.signature);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, `${JSON.stringify(saved, null, 2)}\n`);
  return file;
}

export async function removeCase(file: string): Promise<void> {
  await rm(file, { force: true });
}
