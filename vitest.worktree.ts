/**
 * vitest's global setup: a test run leaves the checkout as it found it (scripts/worktree.ts says
 * why). The tree is pictured before the first file runs and compared after the last; a change
 * fails the run, naming each path. Watch mode is left alone: there the developer is editing.
 */
import type { TestProject } from 'vitest/node';
import { pictureTree, treeChangedReport, treeChanges } from './scripts/worktree.js';

export default function setup(project: TestProject): (() => void) | undefined {
  if (project.vitest.config.watch) return undefined;
  const before = pictureTree();
  return () => {
    const changes = treeChanges(before, pictureTree());
    if (changes.length === 0) return;
    console.error(`\n${treeChangedReport('This test run', changes)}\n`);
    // A global teardown's exception is printed but leaves the exit code 0: fail the run this way.
    process.exitCode = 1;
  };
}
