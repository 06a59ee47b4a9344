/**
 * The README and the docs site are a promise: their TypeScript blocks type-check against the
 * package, the core example runs, their shell blocks run as written, every flag their usage blocks
 * show exists, and their transcripts (`$ agent …` followed by output) match what the command
 * prints today. (The generated TypeScript API pages are TypeDoc's, from the sources.)
 */
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { runAgent, scratch } from '../commands/testing.js';
import { importModule } from '../src/shared/import-module.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const tmp = scratch();
afterAll(() => tmp.cleanup());

/** A temporary folder whose TypeScript files are ES modules (a reader's blocks use top-level await). */
async function moduleFolder(prefix: string): Promise<string> {
  const dir = await tmp.dir(prefix);
  await writeFile(path.join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  return dir;
}

/**
 * A folder that reads as this checkout (each of its top-level entries linked in, node_modules too)
 * but writes into itself: a page's shell blocks run there as a reader's would in a clone, `runs/`
 * and all, and the checkout is left as it was. Each page has its own, so pages run side by side.
 */
async function readersCheckout(): Promise<string> {
  const dir = await tmp.dir('docs-reader-');
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 }).toString('utf8');
  const top = new Set(files.split('\n').filter(Boolean).map((f) => f.split('/')[0] as string));
  for (const name of [...top, 'node_modules']) await symlink(path.join(ROOT, name), path.join(dir, name));
  return dir;
}

interface Block {
  readonly lang: string;
  readonly body: string;
  readonly line: number;
  readonly file: string;
}

/** README.md and every page of the docs site but the generated API reference, by path. */
async function markdownFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!entry.name.startsWith('.') && p !== path.join(ROOT, 'docs', 'reference', 'api')) out.push(...(await markdownFiles(p)));
    } else if (entry.name.endsWith('.md')) out.push(p);
  }
  return out;
}
const pages = new Map<string, string>();
for (const file of [path.join(ROOT, 'README.md'), ...(await markdownFiles(path.join(ROOT, 'docs')))]) pages.set(path.relative(ROOT, file), await readFile(file, 'utf8'));
const allText = [...pages.values()].join('\n');
const blocks: Block[] = [];
for (const [file, text] of pages) {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i] as string);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    blocks.push({ lang: open[1] ?? '', body: lines.slice(i + 1, end).join('\n'), line: i + 1, file });
    i = end;
  }
}
const tsBlocks = blocks.filter((b) => b.lang === 'ts' && b.body.includes("from 'agentic-rl-toolkit"));
const shBlocks = blocks.filter((b) => b.lang === 'sh' && /^(npx )?(agent|agentic-rl-toolkit) /m.test(b.body));
const transcripts = blocks.filter((b) => b.lang === '' && b.body.startsWith('$ agent '));
const usages = blocks.filter((b) => b.lang === '' && /^agent [a-z-]+ /.test(b.body));

/** Split a command line the way a shell would for these simple cases (no quotes in README commands). */
const argv = (command: string): string[] => command.trim().split(/\s+/);

describe('the README and the docs', () => {
  it('has the blocks this test reads', () => {
    expect(tsBlocks.length).toBeGreaterThanOrEqual(2);
    expect(shBlocks.length).toBeGreaterThanOrEqual(3);
    expect(transcripts.length).toBeGreaterThanOrEqual(2);
    expect(usages.length).toBeGreaterThanOrEqual(3);
  });

  it('names every event type and every trainer-export field the schemas define (the docs cannot drift from them)', async () => {
    const schema = (name: string): { properties: Record<string, { enum?: string[] }> } => JSON.parse(readFileSync(path.join(ROOT, 'schemas', `${name}.schema.json`), 'utf8')) as { properties: Record<string, { enum?: string[] }> };
    const row = allText.split('\n').find((l) => l.startsWith('| `events.jsonl`')) ?? '';
    expect((schema('run-event').properties['type']?.enum ?? []).filter((t) => !row.includes(`\`${t}\``))).toEqual([]);
    const exportSection = pages.get('docs/how-to/export.md') ?? '';
    expect(Object.keys(schema('export-record').properties).filter((f) => !exportSection.includes(f))).toEqual([]);
  });

  it('marks as `shell` (not run) only blocks that start a server, which stays up until stopped, or need a model server', () => {
    const servers = blocks.filter((b) => b.lang === 'shell');
    for (const b of servers) expect(b.body, `${b.file}:${b.line}`).toMatch(/agent (serve|worker|mcp-serve|run .*--port)\b|^vllm serve |tiny_vllm_server\.py|--llm-base-url http/m);
  });

  it('TypeScript blocks type-check against the package (strict)', async () => {
    const work = await moduleFolder('docs-ts-');
    const files: string[] = [];
    for (const b of tsBlocks) {
      const file = path.join(work, `block-${b.file.replace(/[/.]/g, '-')}-${b.line}.ts`);
      await writeFile(file, `${b.body}\nexport {};\n`);
      files.push(file);
    }
    const config = ts.getParsedCommandLineOfConfigFile(path.join(ROOT, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined });
    const program = ts.createProgram(files, { ...config?.options, noEmit: true, noUnusedLocals: false });
    // The blocks' own diagnostics: checking the whole program (the package's sources) would cost seconds more.
    const diagnostics = files.flatMap((f) => ts.getPreEmitDiagnostics(program, program.getSourceFile(f)));
    const text = ts.formatDiagnostics(diagnostics, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => ROOT, getNewLine: () => '\n' });
    expect(text).toBe('');
  }, 60_000);

  it('the core example runs as written', async () => {
    const core = tsBlocks.find((b) => b.body.includes("AgentEnv.open('fixtures/weather')"));
    expect(core).toBeDefined();
    const file = path.join(await moduleFolder('docs-core-'), 'core-example.ts');
    await writeFile(file, `${(core as Block).body}\nexport {};\n`);
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    try {
      await importModule(file);
    } finally {
      log.mockRestore();
    }
  }, 30_000);

  // A page's blocks run in order (a later one may read what an earlier one wrote), pages side by side.
  const pageTurns = new Map<string, Promise<string>>();
  it.concurrent.each(shBlocks.map((b) => [`${b.file}:${b.line}`, b] as const))('the shell block at %s runs as written', async (_where, block) => {
    const before = pageTurns.get(block.file) ?? readersCheckout();
    const turn = before.then(async (cwd) => {
      const home = await tmp.dir('readme-home-');
      // `npx agent` and `npx agentic-rl-toolkit` (and a bare `agent`, installed with npm i -g) are this checkout's CLI; npm lines (install, test) are what CI itself does.
      const shim = `npx() { [ "$1" = agent ] || [ "$1" = agentic-rl-toolkit ] || return 2; shift; node ${JSON.stringify(path.join(ROOT, 'bin/agent.js'))} "$@" || { c=$?; [ $c -le 1 ] || { echo "exit $c: agent $*" >&2; return $c; }; }; }\nagent() { npx agent "$@"; }\nnpm() { :; }\n`;
      const out = await promisify(execFile)('bash', ['-e', '-c', shim + block.body], { cwd, env: { ...process.env, HOME: home, NO_COLOR: '1' }, maxBuffer: 64 * 1024 * 1024 });
      expect(out.stderr).not.toMatch(/internal error|exit \d+: agent/);
      return cwd;
    });
    // The page's next block runs after this one, whether or not this one passed.
    pageTurns.set(block.file, turn.catch(() => before));
    await turn;
  }, 180_000);

  it.each(usages.map((b) => [b.body.split('\n')[0]?.split(' ').slice(0, 2).join(' '), b] as const))('every flag in the usage of `%s` exists', async (_name, block) => {
    for (const line of block.body.split('\n')) {
      const command = /^agent ([a-z-]+)/.exec(line)?.[1] ?? /^agent ([a-z-]+)/.exec(block.body)?.[1];
      const { stdout } = await runAgent([command as string, '--help']);
      for (const flag of line.match(/--[a-z-]+/g) ?? []) expect(stdout, `${flag} in agent ${command} --help`).toContain(flag);
    }
  });

  it.each(transcripts.map((b) => [b.body.split('\n')[0], b] as const))('the transcript `%s` matches what the command prints', async (_cmd, block) => {
    const [first, ...shown] = block.body.split('\n');
    const store = await tmp.dir('readme-fuzz-store-');
    const args = argv((first as string).slice('$ agent '.length));
    const { stdout, stderr } = await runAgent(args[0] === 'fuzz' ? [...args, '--store', store] : args);
    // Wall-clock figures differ from run to run; everything else must be as shown. A transcript is
    // what a terminal shows: progress (stderr), then the result (stdout).
    const normalize = (l: string): string => l.replace(/\d+(\.\d+)? s, [\d,]+ cases\/s/, '<time>').trimEnd();
    const actual = `${stderr}${stdout}`.replaceAll(store, '.agent-fuzz').split('\n').map(normalize);
    for (const line of shown.map(normalize)) {
      if (line.trim() === '…' || line === '') continue;
      if (line.endsWith(' …')) expect(actual.some((a) => a.startsWith(line.slice(0, -2))), line).toBe(true);
      else expect(actual, line).toContain(line);
    }
  }, 60_000);
});
