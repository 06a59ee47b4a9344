/**
 * Imports a user's module (tools, policies) by path, from anywhere on disk:
 * - TypeScript compiles on the fly through tsx's `tsImport`, which registers no global loader,
 *   so this works the same under the CLI, vitest or a trainer's own Node process;
 * - `import … from 'agentic-rl-toolkit'` (and its subpaths) in that module resolves to the copy
 *   of the toolkit that is running, so an env folder needs no install of its own and shares this
 *   copy's classes and error brands. Both loaders learn it: ESM through a resolve hook (every
 *   entry point), and CommonJS (a `.ts` file in a folder without `"type": "module"` compiles to
 *   `require`) by wrapping Node's CommonJS loader, the only hook Node 20 offers for `require`
 *   (the core entry point);
 * - a module that fails to import is reported with the file and line where it failed.
 */
import { spawnSync } from 'node:child_process';
import { createRequire, register } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describeError } from './errors.js';

const TS = new Set(['.ts', '.mts', '.cts', '.tsx']);
const PACKAGE = 'agentic-rl-toolkit';
// `.ts` when running from a checkout's sources, `.js` when built: the entry points have the same form.
const OWN_EXT = path.extname(fileURLToPath(import.meta.url));
/** package.json's `exports` (scripts/api-report.ts checks that the two agree). */
export const PACKAGE_ENTRIES: Readonly<Record<string, string>> = {
  [PACKAGE]: `../index${OWN_EXT}`,
  ...Object.fromEntries(['schema', 'schema-diff', 'fuzz', 'benchmark', 'serve', 'replay', 'observe', 'distributed', 'testing'].map((sub) => [`${PACKAGE}/${sub}`, `../${sub}${OWN_EXT}`])),
  [`${PACKAGE}/store/redis`]: `../store-redis${OWN_EXT}`,
  [`${PACKAGE}/ui`]: `../ui/index${OWN_EXT}`,
  [`${PACKAGE}/cli`]: `../../commands/main${OWN_EXT}`,
};
const TARGETS: Readonly<Record<string, string>> = Object.fromEntries(Object.entries(PACKAGE_ENTRIES).map(([spec, rel]) => [spec, new URL(rel, import.meta.url).href]));

// Runs in Node's loader thread; `data` carries the targets there. The target goes on down the chain
// rather than short-circuiting, so that tsx's hooks (registered before this one) still claim a
// TypeScript target.
const HOOK = `let targets = {};
export function initialize(data) { targets = data.targets; }
export async function resolve(specifier, context, next) {
  return next(targets[specifier] ?? specifier, context);
}`;

let installed: Promise<void> | undefined;

interface CommonJsLoader {
  _load: (request: string, ...rest: unknown[]) => unknown;
}

/**
 * Make `agentic-rl-toolkit` resolve to this copy from any module loaded afterwards. `require` of
 * the core returns the running copy's namespace itself: a CommonJS env then gets the very objects
 * the CLI uses, instead of a second copy compiled to CommonJS by tsx.
 */
export function resolveToolkitFromAnywhere(): Promise<void> {
  installed ??= (async () => {
    register(`data:text/javascript,${encodeURIComponent(HOOK)}`, { data: { targets: TARGETS } });
    const core = strictExports((await import(TARGETS[PACKAGE] as string)) as Record<string | symbol, unknown>);
    const Module = createRequire(import.meta.url)('node:module') as CommonJsLoader;
    const original = Module._load;
    Module._load = function load(request: string, ...rest: unknown[]): unknown {
      return request === PACKAGE ? core : original.call(this, request, ...rest);
    };
  })();
  return installed;
}

/** Property names that code probes on any object (interop, promises, inspection, test matchers): never an error to read. */
const PROBES = new Set(['__esModule', 'default', 'then', 'toJSON', 'constructor', 'inspect', 'asymmetricMatch', '$$typeof', 'nodeType', 'toString', 'valueOf']);

/**
 * The core's namespace as `require` returns it, refusing a name it does not export: ESM says so
 * at import time ("does not provide an export named"), but CommonJS would read `undefined` and
 * fail far from the typo. Reading an unknown export throws, naming the ones that exist.
 */
function strictExports(ns: Record<string | symbol, unknown>): Record<string | symbol, unknown> {
  return new Proxy(ns, {
    get(target, prop, receiver) {
      if (typeof prop === 'string' && !(prop in target) && !PROBES.has(prop)) {
        const names = Object.keys(target).sort();
        const close = names.filter((n) => n.toLowerCase().includes(prop.toLowerCase().slice(0, 4)));
        const listed = close.length > 0 ? `did you mean ${close.slice(0, 3).join(', ')}?` : `it exports ${names.slice(0, 24).join(', ')}${names.length > 24 ? `, … (${names.length} in all)` : ''}`;
        throw new TypeError(`'${PACKAGE}' has no export named '${prop}': ${listed}`);
      }
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
}

/**
 * Where in `file` an import failed: from a syntax error's message (`tools.ts:3:7: ERROR: …`) or
 * from the first stack frame in the file.
 */
function locate(err: unknown, file: string): { location?: string; message: string } {
  const names = [file, path.basename(file)];
  const messageLines = describeError(err).split('\n').filter((l) => l.trim() !== '');
  const first = messageLines[0] ?? 'failed';
  for (const line of [...messageLines, ...describeError(err, { stack: true }).split('\n')]) {
    // A frame in tsx's data: URL (a CommonJS module) has positions in the compiled code: no use.
    if (!names.some((n) => line.includes(n)) || line.includes('data:text/javascript')) continue;
    const m = /:(\d+):(\d+)(?::\s*(.*)|\)?\s*$)/.exec(line);
    // A syntax error's own line ("tools.ts:2:18: ERROR: Unexpected ';'") says more than its first.
    if (m) return { location: `${file}:${m[1]}:${m[2]}`, message: m[3] ? `${first.split(':')[0]}: ${m[3]}` : first };
  }
  // Node 20 names no position for a syntax error in an ES module it compiles itself (a .js file of
  // an installed toolkit): its own checker does, on stderr (`file:2`, the line, a caret under the column).
  if (err instanceof SyntaxError && JS.has(path.extname(file))) {
    const checked = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 10_000 });
    const lines = (checked.stderr ?? '').split('\n');
    const at = lines.findIndex((l) => l.endsWith(`${path.basename(file)}:${/:(\d+)$/.exec(l)?.[1] ?? 'x'}`));
    const line = at >= 0 ? /:(\d+)$/.exec(lines[at] as string)?.[1] : undefined;
    const caret = at >= 0 ? (lines[at + 2] ?? '').indexOf('^') : -1;
    if (line !== undefined) return { location: caret >= 0 ? `${file}:${line}:${caret + 1}` : `${file}:${line}`, message: first };
  }
  return { message: first };
}

const JS = new Set(['.js', '.mjs', '.cjs']);

/** Thrown when a user module cannot be imported; `location` is `file:line:column` when known. */
export class ModuleImportError extends Error {
  readonly location: string | undefined;
  constructor(file: string, cause: unknown) {
    const { location, message } = locate(cause, file);
    super(`${location ?? file}: ${message}`, { cause });
    this.name = 'ModuleImportError';
    this.location = location;
  }
}

export async function importModule(file: string): Promise<Record<string, unknown>> {
  await resolveToolkitFromAnywhere();
  const url = pathToFileURL(path.resolve(file)).href;
  try {
    // From the sources (a checkout), the toolkit itself is TypeScript: a JavaScript module that
    // imports it needs tsx's loader too.
    if (!TS.has(path.extname(file)) && OWN_EXT !== '.ts') return unwrapCommonJs((await import(url)) as Record<string, unknown>);
    const api = await import('tsx/esm/api');
    return unwrapCommonJs((await api.tsImport(url, import.meta.url)) as Record<string, unknown>);
  } catch (err) {
    throw new ModuleImportError(path.resolve(file), err);
  }
}

/**
 * A CommonJS module compiled from `export default …` arrives as `{ default: { __esModule, default } }`:
 * lift its exports to the top, so callers see the same shape whatever the folder's module type.
 */
function unwrapCommonJs(ns: Record<string, unknown>): Record<string, unknown> {
  const inner = ns['default'];
  if (typeof inner === 'object' && inner !== null && (inner as Record<string, unknown>)['__esModule'] === true) {
    return { ...ns, ...(inner as Record<string, unknown>) };
  }
  return ns;
}
