import { execFile } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch } from '../commands/testing.js';
import { pictureTree, treeChanges } from './worktree.js';

const run = promisify(execFile);
const tmp = scratch();
afterAll(() => tmp.cleanup());

/** A git work tree with a tracked file, an ignored folder holding a file, and node_modules. */
async function repo(): Promise<string> {
  const dir = await tmp.dir('worktree-');
  await run('git', ['init', '-q'], { cwd: dir });
  await writeFile(path.join(dir, '.gitignore'), 'runs/\nnode_modules/\n');
  await writeFile(path.join(dir, 'a.txt'), 'a');
  await mkdir(path.join(dir, 'runs', 'old'), { recursive: true });
  await writeFile(path.join(dir, 'runs', 'old', 'x.json'), '{}');
  await mkdir(path.join(dir, 'node_modules'));
  await run('git', ['add', '.gitignore', 'a.txt'], { cwd: dir });
  await run('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-qm', 'init'], { cwd: dir });
  return dir;
}

describe('the work-tree picture', () => {
  it('sees a file added inside an ignored folder that already existed, a tracked file changed, one removed (its folder left empty)', async () => {
    const dir = await repo();
    const before = pictureTree(dir);
    await mkdir(path.join(dir, 'runs', 'new'));
    await writeFile(path.join(dir, 'runs', 'new', 'summary.json'), '{}');
    await writeFile(path.join(dir, 'a.txt'), 'changed');
    await rm(path.join(dir, 'runs', 'old', 'x.json'));
    await writeFile(path.join(dir, 'stray.log'), '');
    expect(treeChanges(before, pictureTree(dir))).toEqual(['changed  a.txt', 'added    runs/new/summary.json', 'added    runs/old/', 'removed  runs/old/x.json', 'added    stray.log']);
  });

  it("sees nothing when nothing changed, and leaves the tools' own caches alone", async () => {
    const dir = await repo();
    const before = pictureTree(dir);
    await writeFile(path.join(dir, 'node_modules', 'cache.json'), '{}');
    expect(treeChanges(before, pictureTree(dir))).toEqual([]);
  });
});
