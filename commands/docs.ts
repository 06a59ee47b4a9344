/**
 * `agent docs [page]`: the documentation that ships with the package, offline: every page with its
 * title, or one page printed as written (Markdown), or its path (`--path`, for an editor or a
 * Markdown viewer). Installed from npm the pages sit in node_modules/agentic-rl-toolkit/docs; in a
 * checkout, in docs/. The docs site (`npm run docs:dev` in a checkout) renders the same pages.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import type { Io } from './io.js';
import { core } from './lib.js';

interface Page {
  /** Its path under docs/ without `.md`: `how-to/benchmark`. */
  readonly name: string;
  readonly title: string;
  readonly file: string;
}

interface Flags {
  path?: boolean;
  json?: boolean;
}

const SECTIONS: Readonly<Record<string, string>> = { '': 'Overview', guide: 'Guides', 'how-to': 'How-to', reference: 'Reference' };

/** docs/ of the package this command runs from: commands/ and dist/commands/ are one or two levels below its root. */
function docsRoot(): string | undefined {
  for (const up of ['..', '../..']) {
    const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), up, 'docs');
    if (existsSync(path.join(dir, 'guide'))) return dir;
  }
  return undefined;
}

/** Every Markdown page but the generated API reference (TypeDoc's, on the docs site). */
function pages(root: string): Page[] {
  const out: Page[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!entry.name.startsWith('.') && entry.name !== 'api' && entry.name !== 'public') walk(file);
      } else if (entry.name.endsWith('.md') && entry.name !== 'README.md' && file !== path.join(root, 'index.md')) {
        // (index.md is the site's home page: hero and feature cards, no text of its own.)
        const text = readFileSync(file, 'utf8');
        const name = path.relative(root, file).slice(0, -'.md'.length).split(path.sep).join('/');
        out.push({ name, title: /^# (.+)$/m.exec(text)?.[1]?.trim() ?? name, file });
      }
    }
  };
  walk(root);
  return out;
}

export function registerDocs(program: Command, io: Io): void {
  program
    .command('docs')
    .description('Read the documentation offline: the pages that ship with the package, listed, or one printed.')
    .argument('[page]', 'a page by name: its path under docs/ (how-to/benchmark) or its last part when that is unique (benchmark)')
    .option('--path', "print the page's file path instead of its text")
    .option('--json', 'list the pages as JSON (name, title, file)')
    .addHelpText('after', '\nExamples:\n  agent docs\n  agent docs getting-started\n  agent docs benchmark --path')
    .action(async (page: string | undefined, flags: Flags) => {
      const { AgentError } = await core();
      const root = docsRoot();
      if (!root) throw new AgentError('INTERNAL', 'the documentation is not where this copy of the toolkit keeps it (docs/ beside its package.json)', { hint: 'Reinstall the package (npm i agentic-rl-toolkit), or read the docs site.' });
      const all = pages(root);
      if (page === undefined) {
        if (flags.json) return void io.stdout.write(`${JSON.stringify(all, null, 2)}\n`);
        const width = Math.max(...all.map((p) => p.name.length));
        const lines: string[] = [];
        for (const [dir, heading] of Object.entries(SECTIONS)) {
          const inSection = all.filter((p) => (p.name.includes('/') ? p.name.slice(0, p.name.indexOf('/')) : '') === dir);
          if (inSection.length === 0) continue;
          lines.push(heading, ...inSection.map((p) => `  ${p.name.padEnd(width)}  ${p.title}`), '');
        }
        lines.push(`Read one: agent docs <page> (agent docs benchmark). The pages are Markdown files under ${root}.`);
        return void io.stdout.write(`${lines.join('\n')}\n`);
      }
      const wanted = page.replace(/\.md$/, '').replace(/^docs\//, '');
      const exact = all.find((p) => p.name === wanted);
      const matches = exact ? [exact] : all.filter((p) => p.name.endsWith(`/${wanted}`));
      if (matches.length !== 1) {
        const near = all.filter((p) => p.name.includes(wanted)).map((p) => p.name);
        throw new AgentError('BAD_USAGE', matches.length > 1 ? `'${page}' names ${matches.length} pages: ${matches.map((p) => p.name).join(', ')}` : `no page '${page}' in the docs`, {
          hint: matches.length > 1 ? 'Give its path: agent docs <section>/<page>.' : near.length > 0 ? `Did you mean ${near.join(', ')}? agent docs lists them all.` : 'agent docs lists the pages.',
        });
      }
      const chosen = matches[0] as Page;
      io.stdout.write(flags.path ? `${chosen.file}\n` : readFileSync(chosen.file, 'utf8'));
    });
}
