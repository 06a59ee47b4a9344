import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // Fixtures import the package by name, as users do: in the checkout that means its sources.
  resolve: {
    alias: [
      { find: /^agentic-rl-toolkit$/, replacement: fileURLToPath(new URL('./src/index.ts', import.meta.url)) },
      { find: /^agentic-rl-toolkit\/ui$/, replacement: fileURLToPath(new URL('./src/ui/index.ts', import.meta.url)) },
    ],
  },
  test: {
    include: ['{src,commands,bin,scripts,fixtures}/**/*.test.{ts,tsx}'],
    // Open handles after a run are failures: vitest reports hanging processes on teardown.
    teardownTimeout: 5_000,
    testTimeout: 60_000,
    // Setup and cleanup move files too (an installed package, run folders): under load, past 10 s.
    hookTimeout: 120_000,
    pool: 'forks',
    // Many files wait on child processes, servers and Redis rather than the CPU: more files than
    // cores at once keeps both cores busy.
    maxWorkers: 3,
    setupFiles: ['./vitest.setup.ts'],
    // The run fails if it changed the checkout (scripts/worktree.ts).
    globalSetup: ['./vitest.worktree.ts'],
  },
});
