// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.test-tmp/**', 'runs/**', '.agent-fuzz/**', 'fixtures/**/*.py', '.venv/**', '.bench/**', 'clients/**', 'examples/python/**', 'docs/.vitepress/dist/**', 'docs/.vitepress/cache/**', 'docs/public/**', 'docs/reference/api/**'] },
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
);
