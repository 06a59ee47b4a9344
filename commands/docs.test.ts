import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAgent } from './testing.js';

const DOCS = path.resolve(import.meta.dirname, '..', 'docs');

describe('agent docs', () => {
  it('lists every page by section with its title, and prints one by its name or its path', async () => {
    const list = await runAgent(['docs']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^Guides\n {2}guide\/async-core +The core in code$/m);
    expect(list.stdout).toMatch(/^ {2}reference\/records +Records$/m);
    expect(list.stdout).not.toMatch(/reference\/api|^ {2}index /m);
    const page = await runAgent(['docs', 'schema-diff']);
    expect(page.stdout).toBe(await readFile(path.join(DOCS, 'how-to', 'schema-diff.md'), 'utf8'));
    expect((await runAgent(['docs', 'docs/reference/cli.md', '--path'])).stdout).toBe(`${path.join(DOCS, 'reference', 'cli.md')}\n`);
    const json = JSON.parse((await runAgent(['docs', '--json'])).stdout) as { name: string; title: string }[];
    expect(json.find((p) => p.name === 'how-to/benchmark')?.title).toBe('`agent benchmark`');
  });

  it('names the pages it could have meant', async () => {
    const unknown = await runAgent(['docs', 'bench']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/no page 'bench' in the docs[\s\S]*Did you mean how-to\/benchmark\?/);
  });
});
