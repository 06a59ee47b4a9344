/**
 * Fails on an import cycle, and on imports that cross the architecture's boundaries:
 *   bin → commands → src/internal.ts → the package's entries (src/*.ts) → feature folders → src/shared
 * - src/ never imports commands/ or bin/;
 * - commands/ import src/ only through the CLI's entry (src/internal.ts) and src/ui/index.ts, and
 *   values only lazily (`import()`), so that `agent --help` loads no library code;
 * - nothing in a room imports an entry point (entries only re-export);
 * - the one exception: commands/ read the table of option defaults (src/shared/defaults.ts, which
 *   imports nothing) statically, so their flags show the defaults the library applies;
 * - src/shared imports nothing else internal;
 * - src/ui imports core *types* only (values only from inside src/ui and src/shared);
 * - the rooms of src/ import only down (types too): see ROOMS and docs/architecture.md.
 * Uses TypeScript's own pre-processor, so it sees exactly the imports the compiler sees.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const ROOT = path.resolve(import.meta.dirname, '..');
const DIRS = ['bin', 'commands', 'src'];

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) return files(p);
    return /\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name) && !name.endsWith('.conformance.ts') ? [p] : [];
  });
}

interface Edge {
  readonly to: string;
  readonly typeOnly: boolean;
  readonly dynamic: boolean;
}

function resolveImport(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(from), spec).replace(/\.js$/, '');
  for (const candidate of [`${base}.ts`, `${base}.tsx`, path.join(base, 'index.ts')]) {
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not this one
    }
  }
  return undefined;
}

function edgesOf(file: string): Edge[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true, file.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const edges: Edge[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const to = resolveImport(file, node.moduleSpecifier.text);
      const typeOnly = ts.isImportDeclaration(node)
        ? (node.importClause?.isTypeOnly ?? false) ||
          (node.importClause !== undefined && !node.importClause.name && node.importClause.namedBindings !== undefined && ts.isNamedImports(node.importClause.namedBindings) && node.importClause.namedBindings.elements.every((e) => e.isTypeOnly))
        : node.isTypeOnly;
      if (to) edges.push({ to, typeOnly, dynamic: false });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
      const to = resolveImport(file, node.arguments[0].text);
      if (to) edges.push({ to, typeOnly: false, dynamic: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return edges;
}

/** What commands/ may import: the CLI's private entry (everything public, and what only the CLI uses), and the terminal views. */
const ENTRY_POINTS = new Set(['src/internal.ts', 'src/ui/index.ts']);
/** The option defaults (src/shared/defaults.ts): the one module commands/ may read statically, a table with no imports of its own. */
const DEFAULTS = 'src/shared/defaults.ts';
/** The package's entries are src/*.ts (and src/ui/index.ts): they only re-export, and nothing inside src/ imports them. */
const isEntry = (file: string): boolean => /^src\/[^/]+\.ts$/.test(file) || file === 'src/ui/index.ts';

/**
 * The rooms of src/, lowest first. A module imports only from its own room or a lower floor (never
 * from a room beside it): the library's import graph runs one way, so any room can be read, tested
 * and replaced with only what is under it. docs/architecture.md says what each room holds.
 */
const ROOMS: readonly (readonly string[])[] = [
  ['shared'],
  ['state', 'lifecycle', 'sandbox'],
  ['events'],
  ['schema'],
  ['generate'],
  ['llm', 'tools'],
  ['reward', 'diff'],
  ['env'],
  ['replay', 'server', 'observe'],
  ['console', 'capture'],
  ['run'],
  ['fuzz', 'eval'],
  ['serve'],
  ['ui'],
];
const floorOf = new Map(ROOMS.flatMap((rooms, floor) => rooms.map((room) => [room, floor] as const)));
/** `src/run/run.ts` → `run`; undefined for src/index.ts and files outside src/. */
const roomOf = (file: string): string | undefined => /^src\/([^/]+)\//.exec(file)?.[1];
const rel = (p: string): string => path.relative(ROOT, p);
const graph = new Map<string, Edge[]>();
for (const dir of DIRS) for (const f of files(path.join(ROOT, dir))) graph.set(f, edgesOf(f));

const problems: string[] = [];
for (const [from, edges] of graph) {
  const f = rel(from);
  if (f === DEFAULTS && edges.length > 0) problems.push(`${f} imports ${edges.map((e) => rel(e.to)).join(', ')}: the table of defaults stays a leaf (the CLI loads it at start)`);
  for (const { to, typeOnly, dynamic } of edges) {
    const t = rel(to);
    if (f.startsWith('src/') && (t.startsWith('commands/') || t.startsWith('bin/'))) problems.push(`${f} imports ${t}: src/ never imports commands/ or bin/`);
    // The table of option defaults is a leaf (no imports): the flags read it at start without loading the library.
    if (t === DEFAULTS) continue;
    if (f.startsWith('commands/') && t.startsWith('src/') && !ENTRY_POINTS.has(t)) problems.push(`${f} imports ${t}: commands use the public entry points (${[...ENTRY_POINTS].join(', ')})`);
    if (f.startsWith('commands/') && t.startsWith('src/') && !typeOnly && !dynamic) problems.push(`${f} imports values of ${t} statically: load the library with import() (commands/lib.ts) so that the CLI starts fast`);
    if (f.startsWith('src/') && !isEntry(f) && !f.endsWith('.test.ts') && isEntry(t)) problems.push(`${f} imports ${t}: an entry point re-exports the rooms; a room imports the module it needs, never an entry`);
    if (f.startsWith('src/shared/') && !t.startsWith('src/shared/')) problems.push(`${f} imports ${t}: src/shared imports nothing internal`);
    if (f.startsWith('src/ui/') && !typeOnly && !t.startsWith('src/ui/') && !t.startsWith('src/shared/')) problems.push(`${f} imports ${t}: src/ui imports core types only`);
    const [a, b] = [roomOf(f), roomOf(t)];
    if (a !== undefined && b !== undefined && a !== b) {
      const [fa, fb] = [floorOf.get(a), floorOf.get(b)];
      if (fa === undefined) problems.push(`${f}: src/${a}/ is not a room of scripts/check-imports.ts (ROOMS): give it a floor`);
      else if (fb === undefined || fb >= fa) problems.push(`${f} imports ${t}${typeOnly ? ' (types)' : ''}: src/${a}/ may import only rooms below it, and src/${b}/ is ${fb === fa ? 'beside' : 'above'} it`);
    }
  }
}

// Cycles, by depth-first search over value and type imports alike.
const state = new Map<string, 'open' | 'done'>();
const stack: string[] = [];
const visit = (node: string): void => {
  state.set(node, 'open');
  stack.push(node);
  for (const { to } of graph.get(node) ?? []) {
    if (state.get(to) === 'open') problems.push(`import cycle: ${[...stack.slice(stack.indexOf(to)), to].map(rel).join(' → ')}`);
    else if (!state.has(to)) visit(to);
  }
  stack.pop();
  state.set(node, 'done');
};
for (const node of graph.keys()) if (!state.has(node)) visit(node);

if (problems.length > 0) {
  console.error(`check-imports: ${problems.length} problem(s)\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  process.exitCode = 1;
} else {
  console.log(`check-imports: ${graph.size} modules, no cycles, boundaries respected`);
}
