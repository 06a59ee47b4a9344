// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.test-tmp/**', 'runs/**', '.agent-fuzz/**', 'fixtures/**/*.py', '.venv/**', '.bench/**', 'clients/**', 'examples/python/**', 'docs/.vitepress/dist/**', 'docs/.vitepress/cache/**', 'docs/public/**', 'docs/reference/api/**', 'src/schema/meta-validators.generated.ts'] },
  js.configs.recommended,
  ...tseslint.configs.strict,
  {
    languageOptions: { globals: { console: 'readonly', process: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.name='eval']", message: 'No eval: enabled_if has its own parser.' },
        { selector: "NewExpression[callee.name='Function']", message: 'No new Function.' },
      ],
    },
  },
  {
    // What runs at every step. On Node 20, `{ ...x, key }` (a spread followed by keys) gives each object a
    // hidden class of its own: every reader of it goes megamorphic and JSON.stringify leaves its fast path
    // (5.0 against 1.8 µs an event in bench/object-shapes.bench.ts), and a kept record costs its map too.
    files: ['src/env/agent-instance.ts', 'src/env/trace.ts', 'src/events/**/*.ts', 'src/reward/ledger.ts', 'src/state/**/*.ts', 'src/serve/protocol.ts', 'src/serve/served-episode.ts', 'src/serve/serve-server.ts', 'src/serve/rollouts.ts', 'src/serve/episode-collector.ts', 'src/tools/router.ts', 'src/run/episode-runner.ts', 'src/replay/run-writer.ts', 'src/replay/reward-log.ts', 'src/replay/run-index-encoder.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.name='eval']", message: 'No eval: enabled_if has its own parser.' },
        { selector: "NewExpression[callee.name='Function']", message: 'No new Function.' },
        { selector: "ObjectExpression[properties.0.type='SpreadElement'][properties.length>1]", message: 'A spread followed by keys makes a hidden class per object on Node 20: build a literal, or Object.assign({}, x, { … }).' },
      ],
    },
  },
);
