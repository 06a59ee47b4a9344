/**
 * The package as a user gets it: `npm pack` (which builds), install the tarball into a fresh
 * folder, then use it from there: plain-Node ESM and CommonJS, the CLI, an env folder written
 * outside the repo in TypeScript (ESM and CommonJS, with and without a package.json of its own)
 * that imports the package, and a strict consumer type-check.
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { cp, mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratch } from '../commands/testing.js';
import { bwrapForTests } from '../src/sandbox/bwrap-testing.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
const tmp = scratch();
let consumer = '';
let outside = '';
let packed: { filename: string; size: number; files: { path: string }[] };
let tarball = '';

async function node(args: string[], cwd: string): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const r = await run(process.execPath, args, { cwd, env: { ...process.env, NO_COLOR: '1' }, maxBuffer: 16 * 1024 * 1024 });
    return { ...r, code: 0 };
  } catch (err) {
    const e = err as { stdout: string; stderr: string; code: number };
    return { stdout: e.stdout, stderr: e.stderr, code: e.code };
  }
}

// Refuses to resolve the heavy modules: a module graph that needs them fails to load.
const REFUSE_HOOK = `export async function resolve(specifier, context, next) {
  if (/^(ink|react)(\\/|$)/.test(specifier)) throw new Error('refused ' + specifier);
  return next(specifier, context);
}`;

const agentBin = (): string => path.join(consumer, 'node_modules', 'agentic-rl-toolkit', 'bin', 'agent.js');

// A minimal env in TypeScript whose tools import the package by name, as the README shows.
const ENV_FILES = {
  'state_schema.json': { type: 'object', required: ['count'], properties: { count: { type: 'integer', minimum: 0 } } },
  'action_schema.json': { properties: { bump: { params: { by: { type: 'integer', minimum: 1, maximum: 3 } } } } },
  'reward_schema.json': { properties: { progress: { type: 'number', delay_ms: 0 } } },
  'initial_states.json': [{ count: 0 }],
};
const TOOLS_TS = `import { defineTool, ToolError, type JsonObject } from 'agentic-rl-toolkit';
export const bump = defineTool<{ by: number }>(({ by }, ctx) => {
  const count = (ctx.state as JsonObject)['count'] as number;
  if (count > 1000) throw new ToolError('TOOL_FAILED', 'bump', 'too high');
  return { observation: { count: count + by }, patch: [{ op: 'replace', path: '/count', value: count + by }], rewards: { progress: by } };
});
`;
const POLICY_TS = `import type { Policy } from 'agentic-rl-toolkit';
const policy: Policy = (obs) => (obs.step < 3 ? { name: 'bump', params: { by: 2 } } : null);
export default policy;
`;

async function writeEnv(dir: string, extra: Record<string, string> = {}): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const [name, value] of Object.entries(ENV_FILES)) await writeFile(path.join(dir, name), JSON.stringify(value));
  await writeFile(path.join(dir, 'tools.ts'), TOOLS_TS);
  await writeFile(path.join(dir, 'policy.ts'), POLICY_TS);
  for (const [name, text] of Object.entries(extra)) await writeFile(path.join(dir, name), text);
}

/**
 * A copy of the checkout (what git tracks or would, and its node_modules linked in) to pack from:
 * `npm pack` builds into the folder it packs (prepack), and no other test may see a dist/ appear,
 * half-built, in the checkout it reads.
 */
async function copyOfCheckout(): Promise<string> {
  const copy = await tmp.dir('agent-pack-src-');
  const { stdout } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
  const files = stdout.split('\0').filter((f) => f !== '' && existsSync(path.join(ROOT, f)));
  await Promise.all(files.map((f) => cp(path.join(ROOT, f), path.join(copy, f))));
  await symlink(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
  return copy;
}

beforeAll(async () => {
  const dest = await tmp.dir('agent-pack-');
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dest], { cwd: await copyOfCheckout(), maxBuffer: 64 * 1024 * 1024 });
  // npm prints the prepack script's output before the JSON.
  packed = (JSON.parse(stdout.slice(stdout.indexOf('[\n'))) as (typeof packed)[])[0] as typeof packed;
  tarball = path.join(dest, packed.filename);
  consumer = await tmp.dir('agent-consumer-');
  await writeFile(path.join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], { cwd: consumer, maxBuffer: 64 * 1024 * 1024 });
  outside = await tmp.dir('agent-outside-');
}, 180_000);

afterAll(() => tmp.cleanup());

describe('the tarball', () => {
  it('ships built code, types, schemas and the quick-start fixtures, and no tests or real-world data', () => {
    const files = packed.files.map((f) => f.path);
    // τ²-bench's and τ-bench's databases, the built code with its source maps, and the docs with their screenshots.
    expect(packed.size).toBeLessThan(4 * 1024 * 1024);
    const pkg = JSON.parse(JSON.stringify(packed)) as unknown;
    expect(pkg).toBeTruthy();
    for (const must of ['dist/src/index.js', 'dist/src/index.d.ts', 'dist/src/index.js.map', 'dist/src/ui/index.js', 'dist/commands/main.js', 'dist/bin/agent.js', 'dist/web/console.js', 'dist/web/console.css', 'bin/agent.js', 'schemas/env-manifest.schema.json', 'docs/reference/records.md', 'docs/guide/getting-started.md', 'docs/how-to/benchmark.md', 'docs/web-console/overview.png', 'CHANGELOG.md', 'clients/python/pyproject.toml', 'clients/python/agentic_rl/client.py', 'examples/python/reinforce.py', 'examples/python/grpo_tools.py', 'examples/python/tiny_vllm_server.py', 'examples/agents/openai-tools.mjs', 'examples/agents/openai_tools.py', 'fixtures/lookup/tools.ts', 'fixtures/lookup/tasks/train.jsonl', 'fixtures/weather/tools.ts', 'fixtures/tau-bench/retail/tools.ts', 'fixtures/tau-bench/common.ts', 'fixtures/tau-bench/LICENSE']) {
      expect(files).toContain(must);
    }
    expect(files.filter((f) => /\.test\.tsx?$|(^|\/)\.ci\/|fixtures\/realworld|tsconfig|vitest|docs\/reference\/api\/|\.vitepress/.test(f))).toEqual([]);
  });

  it('passes publint and Are the Types Wrong?, but for the one CommonJS warning explained here', async () => {
    const { publint } = await import('publint');
    const tarballData = await readFile(tarball);
    // The installed copy holds exactly the packed files: publint reads them there, without packing again.
    const lint = await publint({ pkgDir: path.join(consumer, 'node_modules', 'agentic-rl-toolkit'), pack: false, level: 'suggestion' });
    expect(lint.messages.map((m) => `${m.type} ${m.code} ${m.path.join('.')}`)).toEqual([]);
    const { checkPackage, createPackageFromTarballData } = await import('@arethetypeswrong/core');
    const result = await checkPackage(createPackageFromTarballData(new Uint8Array(tarballData)));
    const problems = 'problems' in result ? result.problems : [];
    // The package is ESM only. TypeScript's node16 resolution for a CommonJS file flags each entry
    // "CJS resolves to ESM", since require() of an ES module failed before Node 20.19; the package
    // needs Node >= 20.19 (engines), where require() loads it (the CommonJS test below). Every other
    // mode resolves every entry, node10 included (typesVersions).
    expect(problems.filter((p) => p.kind !== 'CJSResolvesToESM').map((p) => JSON.stringify(p))).toEqual([]);
    expect(new Set(problems.map((p) => ('resolutionKind' in p ? p.resolutionKind : '')))).toEqual(new Set(['node16-cjs']));
  });

  it('has every entry point that package.json names', async () => {
    const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, string | Record<string, string>>; bin: Record<string, string> };
    const files = new Set(packed.files.map((f) => f.path));
    const targets = [...Object.values(pkg.bin), ...Object.values(pkg.exports).flatMap((e) => (typeof e === 'string' ? [e] : Object.values(e)))].filter((t) => !t.includes('*'));
    expect(targets.length).toBeGreaterThan(6);
    for (const t of targets) expect(files, t).toContain(t.replace(/^\.\//, ''));
  });
});

describe('the installed package', () => {
  it("runs the README's blocks for any folder as a user would: in an empty folder, from the tarball", async () => {
    // Every shell block of the README and the getting-started and export pages that does not need a checkout (no fixtures/, no `npm test`), in reading order.
    const pages = await Promise.all(['README.md', 'docs/guide/getting-started.md', 'docs/how-to/export.md'].map((p) => readFile(path.join(ROOT, p), 'utf8')));
    const blocks = pages.flatMap((text) => [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] as string)).filter((b) => !/fixtures\/|^npm test/m.test(b));
    expect(blocks.length).toBeGreaterThanOrEqual(4);
    const home = await tmp.dir('readme-user-home-');
    const work = await tmp.dir('readme-user-');
    // `npm install agentic-rl-toolkit` installs the tarball (a copy of what beforeAll installed from it:
    // installing once is enough to know it installs); npx runs what is installed where it runs, and
    // anywhere else would fetch a stranger's package from the registry, which is the mistake this
    // catches; a bare `agent` is the copy installed for the user (npm i -g).
    const shims = [
      `npm() { [ "$1 $2" = "install agentic-rl-toolkit" ] || { echo "README runs npm $*" >&2; return 2; }; [ -d node_modules/agentic-rl-toolkit ] || cp -a ${JSON.stringify(path.join(consumer, 'node_modules'))} ${JSON.stringify(path.join(consumer, 'package.json'))} .; }`,
      `npx() { if [ -x "node_modules/.bin/$1" ]; then command npx --no-install "$@"; else echo "npx $1 outside an installed folder fetches a stranger's package" >&2; return 2; fi; }`,
      `agent() { node ${JSON.stringify(agentBin())} "$@"; }`,
    ].join('\n');
    for (const body of blocks) {
      const r = await run('bash', ['-e', '-c', `${shims}\n${body}`], { cwd: work, env: { ...process.env, HOME: home, NO_COLOR: '1' }, maxBuffer: 64 * 1024 * 1024 }).catch((err: { stderr: string; code: number }) => err);
      expect('code' in r ? `${r.code}: ${r.stderr}` : '', body).toBe('');
    }
    expect((await readFile(path.join(home, 'envs', 'counter', 'tools.ts'), 'utf8')).length).toBeGreaterThan(0);
  }, 240_000);

  it('runs an episode from a plain-Node ESM script', async () => {
    await writeFile(
      path.join(consumer, 'episode.mjs'),
      `import { AgentEnv } from 'agentic-rl-toolkit';
const env = await AgentEnv.open('node_modules/agentic-rl-toolkit/fixtures/weather', { toolOptions: { latency_scale: 0 } });
const agent = env.createInstance();
await agent.reset({ user_location: '上海', current_weather: null, pending_requests: [] });
const r = await agent.step({ name: 'get_weather', params: { city: '上海' } });
console.log(JSON.stringify({ status: r.info.status, condition: typeof r.state.current_weather?.condition }));
await env.close();
`,
    );
    const r = await node(['episode.mjs'], consumer);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({ status: 'resolved', condition: 'string' });
  });

  it('loads with require() from CommonJS', async () => {
    await writeFile(path.join(consumer, 'load.cjs'), `const lib = require('agentic-rl-toolkit'); console.log(typeof lib.AgentEnv.open, typeof lib.defineTool);`);
    const r = await node(['load.cjs'], consumer);
    expect(r.stdout.trim()).toBe('function function');
  });

  it('loads no ink or React with the core, and no library code for agent --help', async () => {
    // A resolve hook that refuses the heavy modules: the core must import without them; the ui
    // entry must not (which proves the hook works).
    const hook = path.join(consumer, 'refuse.mjs');
    await writeFile(path.join(consumer, 'refuse-hook.mjs'), REFUSE_HOOK);
    await writeFile(hook, `import { register } from 'node:module'; register('./refuse-hook.mjs', import.meta.url);`);
    const core = await node(['--import', hook, '--input-type=module', '-e', `await import('agentic-rl-toolkit'); console.log('core ok')`], consumer);
    expect(core.stdout.trim()).toBe('core ok');
    const ui = await node(['--import', hook, '--input-type=module', '-e', `await import('agentic-rl-toolkit/ui')`], consumer);
    expect(ui.stderr).toMatch(/refused (ink|react)/);
    await writeFile(path.join(consumer, 'refuse-hook.mjs'), REFUSE_HOOK.replace('ink|react', 'ink|react|ajv|cockatiel|execa'));
    const help = await node(['--import', hook, agentBin(), '--help'], consumer);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Usage: agent/);
  });

  it('type-checks in a strict consumer project, with every TypeScript block of the README and the docs', async () => {
    // The docs' blocks against the built package's declarations, as a reader's project compiles them.
    const blocks: string[] = [];
    for (const page of ['README.md', ...(await readdir(path.join(ROOT, 'docs'), { recursive: true })).filter((f) => f.endsWith('.md') && !f.startsWith('reference/api')).map((f) => path.join('docs', f))]) {
      for (const m of (await readFile(path.join(ROOT, page), 'utf8')).matchAll(/```ts\n([\s\S]*?)```/g)) {
        if (!(m[1] as string).includes("from 'agentic-rl-toolkit")) continue;
        const file = `docs-block-${blocks.length}.ts`;
        await writeFile(path.join(consumer, file), `${m[1] as string}\nexport {};\n`);
        blocks.push(file);
      }
    }
    expect(blocks.length).toBeGreaterThanOrEqual(3);
    await writeFile(
      path.join(consumer, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'ES2023', lib: ['ES2023', 'ESNext.Disposable'], noEmit: true, skipLibCheck: false, types: ['node'], typeRoots: [path.join(ROOT, 'node_modules/@types')] }, include: ['check.ts', ...blocks] }),
    );
    await writeFile(
      path.join(consumer, 'check.ts'),
      `import { AgentEnv, defineTool, isAgentError, type StepResult, type Policy } from 'agentic-rl-toolkit';
import { renderRunView, type RunSource } from 'agentic-rl-toolkit/ui';
import { createProgram } from 'agentic-rl-toolkit/cli';
export const t = defineTool<{ city: string }>(({ city }) => ({ observation: city.length }));
export const p: Policy = (obs) => (obs.actions[0] ? { name: obs.actions[0].name, params: {} } : null);
export async function f(): Promise<StepResult> {
  const env = await AgentEnv.open('x');
  const i = env.createInstance();
  try { return await i.step({ name: 'a', params: {} }); } catch (e) { if (isAgentError(e)) throw new Error(e.code); throw e; }
}
export const r = (s: RunSource): void => renderRunView(s, process.stdout, process.stdout).close();
export const c: typeof createProgram = createProgram;
// @ts-expect-error: the params type is enforced
export const bad = defineTool<{ city: string }>(({ city }) => city.toFixed(1));
`,
    );
    const tsc = await node([path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], consumer);
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.code).toBe(0);
    // The resolution modes the README names: node16 and a bundler's as well as nodenext.
    for (const [module, moduleResolution] of [
      ['esnext', 'bundler'],
      ['node16', 'node16'],
    ]) {
      const config = JSON.parse(await readFile(path.join(consumer, 'tsconfig.json'), 'utf8')) as { compilerOptions: Record<string, unknown> };
      await writeFile(path.join(consumer, `tsconfig.${moduleResolution}.json`), JSON.stringify({ ...config, compilerOptions: { ...config.compilerOptions, module, moduleResolution } }));
      const r = await node([path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', `tsconfig.${moduleResolution}.json`], consumer);
      expect(r.stdout + r.stderr, moduleResolution).toBe('');
      expect(r.code, moduleResolution).toBe(0);
    }
    // Three strict compiles of the package's declarations: alone 25 s, past 60 s beside the rest of the suite.
  }, 180_000);
});

describe('npx agent run with an env written anywhere', () => {
  it('benchmarks a suite shipped with the package by its name, from outside a checkout', async () => {
    const list = await node([agentBin(), 'benchmark', '--list'], outside);
    expect(list.stdout).toMatch(/^tau-bench\/retail +115 tasks/m);
    const r = await node([agentBin(), 'benchmark', 'tau-bench/retail', '--policy', 'gold', '--tasks', 'retail-test-0', '--json', '--out', path.join(outside, 'bench-runs')], outside);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ suite: 'tau-bench retail', metrics: { success_rate: { value: 1 } } });
    // Every shipped env and suite goes by name: lookup is the train-loop and token-rollouts pages'.
    const lookup = await node([agentBin(), 'benchmark', 'lookup', '--policy', 'gold', '--tasks', 'lookup-test-0', '--json', '--out', path.join(outside, 'bench-runs')], outside);
    expect(lookup.code, lookup.stderr).toBe(0);
    expect(JSON.parse(lookup.stdout)).toMatchObject({ metrics: { success_rate: { value: 1 } } });
    const run = await node([agentBin(), 'run', 'lookup', '--episodes', '1', '--out', path.join(outside, 'lookup-runs')], outside);
    expect(run.code, run.stderr).toBe(0);
    // The sandboxed suite's tools (a TypeScript module importing the package) run from the install.
    if (bwrapForTests('the installed python-repair suite')) {
      const repair = await node([agentBin(), 'benchmark', 'code/python-repair', '--policy', 'gold', '--tasks', 'python-repair-0', '--json', '--out', path.join(outside, 'bench-runs')], outside);
      expect(repair.code, repair.stderr).toBe(0);
      expect(JSON.parse(repair.stdout)).toMatchObject({ metrics: { success_rate: { value: 1 } } });
    }
  });

  it('serves the web console from the built bundle (no bundler at run time)', async () => {
    const r = await node([agentBin(), 'benchmark', 'tau-bench/retail', '--policy', 'gold', '--tasks', 'retail-test-0', '--out', path.join(outside, 'web-runs')], outside);
    expect(r.code, r.stderr).toBe(0);
    const dir = path.join(outside, 'web-runs', (await readdir(path.join(outside, 'web-runs')))[0] as string);
    const child = spawn(process.execPath, [agentBin(), 'debug', '--web', dir, '--json'], { cwd: outside, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
      const url = new URL((JSON.parse(line) as { url: string }).url);
      const js = await fetch(new URL('/assets/console.js', url));
      expect(js.status).toBe(200);
      expect(await js.text()).toBe(await readFile(path.join(consumer, 'node_modules', 'agentic-rl-toolkit', 'dist', 'web', 'console.js'), 'utf8'));
      const overview = (await (await fetch(new URL('/api/overview', url), { headers: { authorization: `Bearer ${decodeURIComponent(url.hash.slice('#token='.length))}` } })).json()) as { benchmark?: { suite: string } };
      expect(overview.benchmark?.suite).toBe('tau-bench retail');
    } finally {
      child.kill('SIGINT');
      await once(child, 'exit');
    }
  });

  it('has every page the README links, and reads them offline with agent docs', async () => {
    const installed = path.join(consumer, 'node_modules', 'agentic-rl-toolkit');
    const readme = await readFile(path.join(installed, 'README.md'), 'utf8');
    const links = [...readme.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)].map((m) => m[1] as string).filter((l) => !/^[a-z]+:/.test(l));
    expect(links.length).toBeGreaterThan(20);
    expect(links.filter((l) => !existsSync(path.join(installed, l)))).toEqual([]);
    const list = await node([agentBin(), 'docs'], outside);
    expect(list.stdout).toMatch(/^ {2}how-to\/benchmark +`agent benchmark`$/m);
    const page = await node([agentBin(), 'docs', 'getting-started'], outside);
    expect(page.stdout).toBe(await readFile(path.join(installed, 'docs', 'guide', 'getting-started.md'), 'utf8'));
  });

  it('has a command named after the package, beside agent', async () => {
    const version = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const bin of ['agentic-rl-toolkit', 'agent']) {
      const r = await node([path.join(consumer, 'node_modules', '.bin', bin), '--version'], consumer);
      expect(r.stdout.trim(), bin).toBe(version.version);
    }
  });

  it('runs a TypeScript env in the consumer folder (ESM) that imports the package', async () => {
    const env = path.join(consumer, 'my-env');
    await writeEnv(env);
    const r = await node([agentBin(), 'run', './my-env', '--episodes', '2', '--policy', './my-env/policy.ts', '--out', 'runs'], consumer);
    // Progress goes to stderr: nothing else there (no warning, no error).
    expect(r.stderr).not.toMatch(/^(warning|error)/m);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/2 episodes/);
    expect(r.stdout).toMatch(/tool bump: 6 calls, 0 failed/);
  });

  it('runs one in a folder with no package.json and no install (CommonJS TypeScript)', async () => {
    const env = path.join(outside, 'cjs-env');
    await writeEnv(env);
    const r = await node([agentBin(), 'run', env, '--episodes', '1', '--policy', path.join(env, 'policy.ts'), '--out', path.join(outside, 'runs')], outside);
    // Progress goes to stderr: nothing else there (no warning, no error).
    expect(r.stderr).not.toMatch(/^(warning|error)/m);
    expect(r.stdout).toMatch(/tool bump: 3 calls, 0 failed/);
  });

  it('runs one in a CommonJS package with JavaScript tools that require() the package', async () => {
    const env = path.join(outside, 'js-env');
    await writeEnv(env, {
      'package.json': JSON.stringify({ name: 'js-env', type: 'commonjs' }),
      'tools.js': `const { defineTool } = require('agentic-rl-toolkit');
exports.bump = defineTool(({ by }, ctx) => ({ observation: ctx.state.count + by, patch: [{ op: 'replace', path: '/count', value: ctx.state.count + by }] }));`,
    });
    const { rm } = await import('node:fs/promises');
    await rm(path.join(env, 'tools.ts'));
    const r = await node([agentBin(), 'run', env, '--episodes', '1', '--policy', path.join(env, 'policy.ts'), '--out', path.join(outside, 'runs')], outside);
    // Progress goes to stderr: nothing else there (no warning, no error).
    expect(r.stderr).not.toMatch(/^(warning|error)/m);
    expect(r.stdout).toMatch(/tool bump: 3 calls, 0 failed/);
  });

  it('names the file and line when a tools module fails to import', async () => {
    const broken = `import { defineTool } from 'agentic-rl-toolkit';\nconst x: number = 1;\nthrow new Error('boom at load ' + x);\nexport const bump = defineTool(() => ({}));\n`;
    const esm = path.join(outside, 'broken-esm');
    await writeEnv(esm, { 'tools.ts': broken, 'package.json': JSON.stringify({ type: 'module' }) });
    const r = await node([agentBin(), 'run', esm, '--episodes', '1'], outside);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/broken-esm\/tools\.ts:3:\d+: Error: boom at load 1/);
    expect(r.stderr).not.toMatch(/internal error/);
    // A syntax error, in a CommonJS folder: esbuild's own location and words.
    const cjs = path.join(outside, 'broken-cjs');
    await writeEnv(cjs, { 'tools.ts': `import { defineTool } from 'agentic-rl-toolkit';\nconst x: number = ;\n` });
    const s = await node([agentBin(), 'run', cjs, '--episodes', '1'], outside);
    expect(s.code).toBe(2);
    expect(s.stderr).toMatch(/broken-cjs\/tools\.ts:2:18: TransformError: ERROR: Unexpected ";"/);
    // A syntax error in a JavaScript module Node compiles itself (it names no position there): found all the same.
    const js = path.join(outside, 'broken-js');
    await mkdir(js, { recursive: true });
    for (const [name, value] of Object.entries(ENV_FILES)) await writeFile(path.join(js, name), JSON.stringify(value));
    await writeFile(path.join(js, 'package.json'), JSON.stringify({ type: 'module' }));
    await writeFile(path.join(js, 'tools.js'), `import { defineTool } from 'agentic-rl-toolkit';\nconst x = ;\nexport const bump = defineTool(() => ({}));\n`);
    const j = await node([agentBin(), 'run', js, '--episodes', '1'], outside);
    expect(j.code).toBe(2);
    expect(j.stderr).toMatch(/broken-js\/tools\.js:2:11: SyntaxError: Unexpected token ';'/);
    expect(j.stderr).not.toContain('npx tsx');
    // A name the package does not export, in a CommonJS folder (where require would read undefined): named, with what is close.
    const typo = path.join(outside, 'typo-cjs');
    await writeEnv(typo, { 'tools.ts': `import { defineTol } from 'agentic-rl-toolkit';\nexport const bump = defineTol(() => ({}));\n` });
    const t = await node([agentBin(), 'run', typo, '--episodes', '1'], outside);
    expect(t.code).toBe(2);
    expect(t.stderr).toMatch(/'agentic-rl-toolkit' has no export named 'defineTol': did you mean .*defineTool/);
  });
});
