import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['{src,commands,bin,scripts,fixtures}/**/*.test.{ts,tsx}'],
    // Open handles after a run are failures: vitest reports hanging processes on teardown.
    teardownTimeout: 5_000,
    testTimeout: 20_000,
    pool: 'forks',
    setupFiles: ['./vitest.setup.ts'],
  },
});
