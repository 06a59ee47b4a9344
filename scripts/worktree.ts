/**
 * Tests write only where they made room for themselves (a temporary folder), never into the
 * checkout: a test that leaves `dist/` or `runs/` behind changes what the next test reads (a
 * half-built `dist/` served to another test is how main's CI went red). This takes a picture of
 * the work tree (git's view of it, and every file under each untracked or ignored folder, with
 * its size and modification time) and names what changed between two pictures.
 *
 * vitest's global setup (vitest.worktree.ts) compares the tree before and after every `vitest run`;
 * the Python suite is wrapped by the command line:
 *
 *   tsx scripts/worktree.ts -- <command> [args…]   runs the command, then fails (exit 1) naming
 *                                                  what it changed in the checkout
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * What a test run may change though git ignores it: the installed dependencies (vitest keeps its
 * own results cache in node_modules/.vite) and the Python venv the Python suite installs itself
 * into. No test reads what another wrote there.
 */
const OWN_CACHES = ['node_modules/', '.venv/'];

export type TreePicture = ReadonlyMap<string, string>;

/** Each changed, untracked or ignored path of the tree under `root`, with its git status, size and mtime. */
export function pictureTree(root = ROOT): TreePicture {
  const out = execFileSync('git', ['status', '--porcelain=v1', '-z', '--ignored', '--untracked-files=normal'], { cwd: root, maxBuffer: 64 * 1024 * 1024 });
  const picture = new Map<string, string>();
  const entries = out.toString('utf8').split('\0');
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i] as string;
    if (entry.length < 4) continue;
    const status = entry.slice(0, 2);
    const rel = entry.slice(3);
    // A rename's origin follows it as its own field.
    if (status.startsWith('R') || status.startsWith('C')) i++;
    // (`node_modules` without its slash: a link to a folder, as some setups make it.)
    if (OWN_CACHES.some((c) => rel === c.slice(0, -1) || rel.startsWith(c))) continue;
    if (rel.endsWith('/')) walk(root, rel, status, picture);
    else picture.set(rel, `${status} ${stamp(path.join(root, rel))}`);
  }
  return picture;
}

function walk(root: string, rel: string, status: string, picture: Map<string, string>): void {
  let names: string[];
  try {
    names = readdirSync(path.join(root, rel));
  } catch {
    return;
  }
  if (names.length === 0) picture.set(rel, `${status} empty folder`);
  for (const name of names) {
    const child = `${rel}${name}`;
    const s = statSync(path.join(root, child), { throwIfNoEntry: false });
    if (s?.isDirectory()) walk(root, `${child}/`, status, picture);
    else picture.set(child, `${status} ${stamp(path.join(root, child))}`);
  }
}

function stamp(file: string): string {
  const s = statSync(file, { throwIfNoEntry: false });
  return s ? `${s.size} bytes, modified ${s.mtimeMs}` : 'deleted';
}

/** A path git does not track (untracked or ignored): it can be added or removed; a tracked one only changes. */
const untracked = (entry: string): boolean => entry.startsWith('??') || entry.startsWith('!!');

/** What differs between two pictures, a line each: `added`, `changed` or `removed`, and the path. */
export function treeChanges(before: TreePicture, after: TreePicture): string[] {
  const changes: string[] = [];
  for (const [p, v] of after) {
    const was = before.get(p);
    if (was === undefined) changes.push(`${untracked(v) ? 'added  ' : 'changed'}  ${p}`);
    else if (was !== v) changes.push(`changed  ${p}`);
  }
  for (const [p, v] of before) if (!after.has(p)) changes.push(`${untracked(v) ? 'removed' : 'changed'}  ${p}`);
  return changes.sort((a, b) => a.slice(9).localeCompare(b.slice(9)));
}

/** The report of a run that changed the tree: what changed (the first 40 paths), and what to do. */
export function treeChangedReport(what: string, changes: readonly string[]): string {
  const shown = changes.slice(0, 40).map((c) => `  ${c}`);
  if (changes.length > shown.length) shown.push(`  … and ${changes.length - shown.length} more`);
  return [
    `${what} changed the checkout (${changes.length} path${changes.length === 1 ? '' : 's'}):`,
    ...shown,
    'Tests write into temporary folders only (scratch() in commands/testing.ts); a test that must run in a checkout-like folder makes one (see scripts/docs.test.ts).',
    'If you edited files while the tests ran, run them again.',
  ].join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const at = process.argv.indexOf('--');
  const command = at >= 0 ? process.argv.slice(at + 1) : [];
  if (command.length === 0) {
    console.error('usage: tsx scripts/worktree.ts -- <command> [args…]');
    process.exit(2);
  }
  const before = pictureTree();
  const r = spawnSync(command[0] as string, command.slice(1), { stdio: 'inherit' });
  const changes = treeChanges(before, pictureTree());
  if (changes.length > 0) {
    console.error(treeChangedReport(command.join(' '), changes));
    process.exit(1);
  }
  process.exit(r.status ?? 1);
}
