/** docs/reference/cli.md is what the commands define: a flag added, renamed or given another default without `npm run docs:cli` fails here. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLI_DOCS, renderCliDocs } from './cli-docs.js';

describe('docs/reference/cli.md', () => {
  const generated = renderCliDocs();

  it('is generated from the commands as they are now (run `npm run docs:cli` after changing one)', () => {
    expect(readFileSync(CLI_DOCS, 'utf8')).toBe(generated);
  });

  it('has every command, flag and default a reader looks up', () => {
    for (const text of ['## `agent serve`', '`--resume <run-id>`', '| `--episodes <n>` | `20` |', '## `agent export`', 'Examples:']) expect(generated).toContain(text);
  });
});
