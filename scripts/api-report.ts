/**
 * The package's public API, as checked-in text: for each entry in package.json's `exports`, every
 * name it exports with its signature (functions' parameters and results, classes' and interfaces'
 * public members, type aliases expanded), in `api/<entry>.api.md`. An export added, removed or
 * changed by accident then fails CI with a diff to review, as API Extractor's reports do.
 *
 *   tsx scripts/api-report.ts          check: exit 1 with the difference when the API changed
 *   tsx scripts/api-report.ts --write  write the reports (after reviewing the change)
 *
 * It also checks that every exported name has a doc comment, and that the entries agree
 * everywhere they are listed (package.json, tsconfig.json's paths, the module resolver of env
 * folders in src/shared/import-module.ts).
 */
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { PACKAGE_ENTRIES } from '../src/shared/import-module.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const OUT = path.join(ROOT, 'api');
const PACKAGE = 'agentic-rl-toolkit';

interface Entry {
  /** `agentic-rl-toolkit/serve` */
  readonly spec: string;
  /** `src/serve.ts` */
  readonly source: string;
  /** `serve` (`index` for the root): the report's file name. */
  readonly name: string;
}

const problems: string[] = [];
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, string | { types: string }>; typesVersions?: Record<string, Record<string, string[]>> };
const entries: Entry[] = Object.entries(pkg.exports)
  .filter((e): e is [string, { types: string }] => typeof e[1] === 'object')
  .map(([sub, target]) => {
    const spec = sub === '.' ? PACKAGE : `${PACKAGE}/${sub.slice(2)}`;
    const source = target.types.replace(/^\.\/dist\//, '').replace(/\.d\.ts$/, '.ts');
    return { spec, source, name: sub === '.' ? 'index' : sub.slice(2).replace(/\//g, '-') };
  });

// One list of entries, wherever they are listed.
const tsconfig = ts.parseConfigFileTextToJson('tsconfig.json', readFileSync(path.join(ROOT, 'tsconfig.json'), 'utf8')).config as { compilerOptions: { paths: Record<string, string[]> } };
const specs = entries.map((e) => e.spec).sort();
const compare = (where: string, names: readonly string[]): void => {
  const sorted = [...names].sort();
  if (sorted.join() !== specs.join()) problems.push(`${where} lists ${sorted.join(', ')}; package.json exports ${specs.join(', ')}`);
};
compare('tsconfig.json paths', Object.keys(tsconfig.compilerOptions.paths));
compare('src/shared/import-module.ts PACKAGE_ENTRIES', Object.keys(PACKAGE_ENTRIES));
// TypeScript's legacy node10 resolution reads no `exports`: typesVersions points it at each subpath's types.
compare('package.json typesVersions', [PACKAGE, ...Object.keys(pkg.typesVersions?.['*'] ?? {}).map((sub) => `${PACKAGE}/${sub}`)]);
for (const e of entries) {
  const types = pkg.typesVersions?.['*']?.[e.spec.slice(PACKAGE.length + 1)]?.[0];
  if (e.spec !== PACKAGE && types !== `./dist/${e.source.replace(/\.ts$/, '.d.ts')}`) problems.push(`package.json typesVersions maps ${e.spec} to ${String(types)}; exports to ./dist/${e.source.replace(/\.ts$/, '.d.ts')}`);
}
for (const e of entries) {
  const mapped = tsconfig.compilerOptions.paths[e.spec]?.[0]?.replace(/^\.\//, '');
  if (mapped !== undefined && mapped !== e.source) problems.push(`tsconfig.json maps ${e.spec} to ${mapped}; package.json to ${e.source}`);
}

const parsed = ts.getParsedCommandLineOfConfigFile(path.join(ROOT, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined });
if (!parsed) throw new Error('tsconfig.json could not be read');
const program = ts.createProgram(entries.map((e) => path.join(ROOT, e.source)), parsed.options);
const checker = program.getTypeChecker();
const FLAGS = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseAliasDefinedOutsideCurrentScope;

const type = (t: ts.Type, at?: ts.Node): string => checker.typeToString(t, at, FLAGS);
/** Members the package declares (not Error's or Object's, from the compiler's lib), and not private. */
const isPublic = (s: ts.Symbol): boolean => {
  if (s.name.startsWith('#') || s.name.startsWith('__')) return false;
  if ((s.declarations ?? []).every((d) => program.isSourceFileDefaultLibrary(d.getSourceFile()) || d.getSourceFile().fileName.includes('/node_modules/'))) return false;
  const modifiers = s.valueDeclaration ? ts.getCombinedModifierFlags(s.valueDeclaration as ts.Declaration) : 0;
  return (modifiers & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) === 0;
};

/** A member of a class or an interface, one line. */
function member(s: ts.Symbol, at: ts.Node): string {
  const decl = s.valueDeclaration ?? s.declarations?.[0];
  const readonly = decl && ts.getCombinedModifierFlags(decl as ts.Declaration) & ts.ModifierFlags.Readonly ? 'readonly ' : '';
  const optional = s.flags & ts.SymbolFlags.Optional ? '?' : '';
  const t = checker.getTypeOfSymbolAtLocation(s, at);
  if (s.flags & ts.SymbolFlags.Method) return t.getCallSignatures().map((sig) => `${s.name}${optional}${checker.signatureToString(sig, at, FLAGS)};`).join('\n  ');
  if (s.flags & ts.SymbolFlags.GetAccessor && !(s.flags & ts.SymbolFlags.SetAccessor)) return `get ${s.name}(): ${type(t, at)};`;
  return `${readonly}${s.name}${optional}: ${type(t, at)};`;
}

function parameter(p: ts.Symbol, at: ts.Node): string {
  const d = p.valueDeclaration as ts.ParameterDeclaration | undefined;
  const rest = d?.dotDotDotToken ? '...' : '';
  const optional = d && (d.questionToken || d.initializer) ? '?' : '';
  return `${rest}${p.name}${optional}: ${type(checker.getTypeOfSymbolAtLocation(p, at), at)}`;
}

function members(props: readonly ts.Symbol[], at: ts.Node): string[] {
  return props.filter(isPublic).map((p) => `  ${member(p, at)}`);
}

/** One exported name, as its declaration would read with every type spelled out. */
function render(exported: ts.Symbol): string {
  const s = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
  const decl = s.declarations?.[0];
  if (!decl) return `${exported.name}: (no declaration)`;
  const name = exported.name;
  const out: string[] = [];
  if (s.flags & ts.SymbolFlags.Class) {
    const statics = checker.getTypeOfSymbolAtLocation(s, decl);
    out.push(`class ${name} {`);
    const publicConstructor = (decl as ts.ClassDeclaration).members.every((m) => !ts.isConstructorDeclaration(m) || !(ts.getCombinedModifierFlags(m) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)));
    if (publicConstructor) for (const sig of statics.getConstructSignatures()) out.push(`  constructor(${sig.parameters.map((p) => parameter(p, decl)).join(', ')});`);
    out.push(...members(checker.getPropertiesOfType(statics).filter((p) => p.name !== 'prototype'), decl).map((l) => `  static${l.slice(1)}`));
    out.push(...members(checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(s)), decl), '}');
  } else if (s.flags & ts.SymbolFlags.Interface) {
    const t = checker.getDeclaredTypeOfSymbol(s);
    out.push(`interface ${name} {`, ...members(checker.getPropertiesOfType(t), decl));
    for (const sig of t.getCallSignatures()) out.push(`  ${checker.signatureToString(sig, decl, FLAGS)};`);
    out.push('}');
  } else if (s.flags & ts.SymbolFlags.TypeAlias) {
    const params = (decl as ts.TypeAliasDeclaration).typeParameters?.map((p) => p.getText()).join(', ');
    out.push(`type ${name}${params ? `<${params}>` : ''} = ${checker.typeToString(checker.getDeclaredTypeOfSymbol(s), decl, FLAGS | ts.TypeFormatFlags.InTypeAlias)};`);
  } else if (s.flags & ts.SymbolFlags.Function) {
    for (const sig of checker.getTypeOfSymbolAtLocation(s, decl).getCallSignatures()) out.push(`function ${name}${checker.signatureToString(sig, decl, FLAGS)};`);
  } else if (s.flags & ts.SymbolFlags.Variable) {
    out.push(`const ${name}: ${type(checker.getTypeOfSymbolAtLocation(s, decl), decl)};`);
  } else out.push(`${name}: ${ts.SymbolFlags[s.flags] ?? s.flags}`);
  return out.join('\n');
}

const written = new Map<string, string>();
for (const entry of entries) {
  const file = program.getSourceFile(path.join(ROOT, entry.source));
  const moduleSymbol = file && checker.getSymbolAtLocation(file);
  if (!moduleSymbol) {
    problems.push(`${entry.source} (${entry.spec}) is not a module the compiler can read`);
    continue;
  }
  const exported = checker.getExportsOfModule(moduleSymbol).sort((a, b) => a.name.localeCompare(b.name));
  for (const e of exported) {
    const target = e.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(e) : e;
    if (ts.displayPartsToString(target.getDocumentationComment(checker)).trim() === '') {
      const d = target.declarations?.[0];
      const where = d ? `${path.relative(ROOT, d.getSourceFile().fileName)}:${d.getSourceFile().getLineAndCharacterOfPosition(d.getStart()).line + 1}` : '?';
      problems.push(`${entry.spec}: ${e.name} (${where}) has no doc comment: say what it is for, in its declaration`);
    }
  }
  const body = exported.map(render).join('\n\n');
  written.set(`${entry.name}.api.md`, `# \`${entry.spec}\`\n\n${exported.length} names. Generated by \`npm run api:update\` from ${entry.source}: review a change to this file as a change to the package's API.\n\n\`\`\`ts\n${body}\n\`\`\`\n`);
}

if (process.argv.includes('--write')) {
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  for (const [name, text] of written) writeFileSync(path.join(OUT, name), text);
  console.log(`api-report: wrote ${written.size} reports to api/`);
} else {
  const existing = new Set(readdirSafe(OUT));
  for (const [name, text] of written) {
    existing.delete(name);
    let before: string;
    try {
      before = readFileSync(path.join(OUT, name), 'utf8');
    } catch {
      problems.push(`api/${name} is missing`);
      continue;
    }
    if (before !== text) problems.push(`api/${name} differs from the package's API:\n${lineDiff(before, text)}`);
  }
  for (const name of existing) problems.push(`api/${name} is for an entry package.json no longer exports`);
}

if (problems.length > 0) {
  console.error(`api-report: ${problems.length} problem(s)\n${problems.map((p) => `  - ${p}`).join('\n')}\nIf the change is meant, run: npm run api:update (and commit api/ with it).`);
  process.exitCode = 1;
} else if (!process.argv.includes('--write')) {
  console.log(`api-report: ${entries.length} entries, ${[...written.values()].reduce((n, t) => n + Number(/^(\d+) names/m.exec(t)?.[1] ?? 0), 0)} names, as reviewed`);
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** The lines only in one of the two, marked - (before) and + (now): enough to review an API change. */
function lineDiff(before: string, now: string): string {
  const a = before.split('\n');
  const b = now.split('\n');
  const inB = new Set(b);
  const inA = new Set(a);
  return [...a.filter((l) => !inB.has(l)).map((l) => `      - ${l}`), ...b.filter((l) => !inA.has(l)).map((l) => `      + ${l}`)].slice(0, 60).join('\n');
}
