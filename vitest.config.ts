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
    testTimeout: 20_000,
    pool: 'forks',
    setupFiles: ['./vitest.setup.ts'],
  },
});
