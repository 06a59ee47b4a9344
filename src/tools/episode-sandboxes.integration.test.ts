/**
 * An env's sandbox through the public API: sandbox tools (env.json `sandbox` bindings) and module
 * tools (`ctx.sandbox`) run in the episode's workspace, seeded from the env's files and the state,
 * kept across the episode's calls, wiped at reset; the listing goes into the state after each call;
 * bad definitions name their field. Needs bubblewrap (in CI its absence fails the suite).
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AgentEnv, defineEnv, isAgentError, type EnvManifest, type JsonValue, type SandboxResult, type ToolHandler } from '../index.js';
import { bwrapForTests } from '../sandbox/bwrap-testing.js';

const available = bwrapForTests('the episode sandbox tests');

/** Host processes whose command line holds `marker`. */
function running(marker: string): number {
  return readdirSync('/proc').filter((p) => {
    if (!/^\d+$/.test(p)) return false;
    try {
      return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(marker);
    } catch {
      return false;
    }
  }).length;
}

const LISTING = {
  type: 'object',
  required: ['files'],
  properties: { files: { type: 'object', additionalProperties: { type: 'object' } }, truncated: { const: true } },
  additionalProperties: false,
};

function manifest(overrides: Partial<EnvManifest> = {}): EnvManifest {
  return {
    name: 'sandboxed',
    state: { type: 'object', properties: { files: { type: 'object', additionalProperties: { type: 'string' } }, workspace: LISTING, notes: { type: 'integer' } }, additionalProperties: false },
    actions: [
      { name: 'sh', parameters: { type: 'object', properties: { script: { type: 'string' } }, required: ['script'], additionalProperties: false } },
      { name: 'echo', parameters: { type: 'object', properties: { text: { type: 'string' }, n: { type: 'integer' } }, additionalProperties: false } },
      { name: 'note', parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false } },
    ],
    sandbox: { files: 'seed', files_from: '/files', limits: { timeout_ms: 10_000 } },
    tools: {
      sh: { sandbox: { command: ['sh', '-c', '{script}'] } },
      echo: { sandbox: { command: ['printf', '%s|%s|{{literal}}', '{text}', '{n}'] } },
    },
    ...overrides,
  };
}

/** A module tool that writes its text through the sandbox and counts its notes in the state. */
const note: ToolHandler = async (params, ctx) => {
  const r = (await ctx.sandbox?.run(['sh', '-c', 'cat >> notes.txt'], { stdin: `${String(params['text'])}\n` })) as SandboxResult;
  const notes = ((ctx.state as { notes?: number }).notes ?? 0) + 1;
  return { observation: { exit_code: r.exit_code, mode: ctx.sandbox?.mechanism.mode ?? null }, patch: [{ op: 'add', path: '/notes', value: notes }] };
};

describe.skipIf(!available)('an env with a sandbox', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'episode-sandbox-test-'));
    await mkdir(path.join(dir, 'seed', 'lib'), { recursive: true });
    await writeFile(path.join(dir, 'seed', 'lib', 'base.txt'), 'from the env\n');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const open = async (overrides: Partial<EnvManifest> = {}, mode?: 'unsafe-host'): Promise<AgentEnv> =>
    AgentEnv.create(await defineEnv(manifest(overrides), { dir }), { handlers: { note }, ...(mode ? { sandbox: mode } : {}) });

  it('runs a sandbox tool with each param one argument, and its result as the observation', async () => {
    await using env = await open();
    const agent = env.createInstance();
    await agent.reset({ files: {} });
    const step = await agent.step({ name: 'echo', params: { text: 'a b; "c" $(id)', n: 3 } });
    expect(step.observation).toMatchObject({ exit_code: 0, signal: null, timed_out: false, oom: false, stdout: 'a b; "c" $(id)|3|{literal}', stderr: '', truncated: false });
    expect(env.sandbox).toMatchObject({ mode: 'isolated' });
  });

  it('seeds the workspace from the env and the state, keeps it across calls, lists it in the state, and wipes it at reset', async () => {
    await using env = await open();
    const agent = env.createInstance();
    await agent.reset({ files: { 'task.py': 'print(1)\n', 'pkg/mod.py': 'x = 2\n' } });
    const first = await agent.step({ name: 'sh', params: { script: 'cat lib/base.txt pkg/mod.py && echo made > made.txt' } });
    expect((first.observation as { stdout: string }).stdout).toBe('from the env\nx = 2\n');
    const listing = (first.state as { workspace: { files: Record<string, { sha256: string; size: number }> } }).workspace.files;
    expect(Object.keys(listing)).toEqual(['lib/base.txt', 'made.txt', 'pkg/mod.py', 'task.py']);
    expect(listing['made.txt']).toEqual({ sha256: createHash('sha256').update('made\n').digest('hex'), size: 5 });

    // A call that changes nothing leaves the state as it was: no new listing.
    const before = first.state;
    const second = await agent.step({ name: 'sh', params: { script: 'cat made.txt' } });
    expect((second.observation as { stdout: string }).stdout).toBe('made\n');
    expect(second.state).toEqual(before);

    // The next episode of the same instance starts from its seed: nothing of the last one survives.
    await agent.reset({ files: {} });
    const third = await agent.step({ name: 'sh', params: { script: 'ls -A; test -e made.txt && echo survived || true' } });
    expect((third.observation as { stdout: string }).stdout).toBe('lib\n');
    expect(Object.keys((third.state as { workspace: { files: object } }).workspace.files)).toEqual(['lib/base.txt']);
  });

  it('gives module tools the episode sandbox: their patch and the listing both land', async () => {
    await using env = await open();
    const agent = env.createInstance();
    await agent.reset({ files: {} });
    await agent.step({ name: 'note', params: { text: 'one' } });
    const step = await agent.step({ name: 'note', params: { text: 'two' } });
    expect(step.observation).toEqual({ exit_code: 0, mode: 'isolated' });
    const state = step.state as { notes: number; workspace: { files: Record<string, { size: number }> } };
    expect(state.notes).toBe(2);
    expect(state.workspace.files['notes.txt']?.size).toBe('one\ntwo\n'.length);
  });

  it('keeps the workspaces of two episodes at once apart', async () => {
    await using env = await open();
    const [a, b] = [env.createInstance(), env.createInstance()];
    await Promise.all([a.reset({ files: { 'who.txt': 'a' } }), b.reset({ files: { 'who.txt': 'b' } })]);
    const [ra, rb] = await Promise.all([a.step({ name: 'sh', params: { script: 'cat who.txt; echo x > mine' } }), b.step({ name: 'sh', params: { script: 'cat who.txt; ls' } })]);
    expect((ra.observation as { stdout: string }).stdout).toBe('a');
    expect((rb.observation as { stdout: string }).stdout).toBe('blib\nwho.txt\n');
  });

  it('fails only the call whose seed files would land outside the workspace, naming the field', async () => {
    await using env = await open();
    const agent = env.createInstance();
    await agent.reset({ files: { '../escape.txt': 'x' } });
    const step = await agent.step({ name: 'sh', params: { script: 'true' } });
    expect(step.info.status).toBe('failed');
    expect(step.info.error?.message).toContain("the state's /files/..~1escape.txt is not a text at a path inside the workspace");
  });

  it('runs on the host only when unsafe-host is asked for, and removes each workspace at reset', async () => {
    await using env = await open({}, 'unsafe-host');
    expect(env.sandbox?.mode).toBe('unsafe-host');
    const agent = env.createInstance();
    await agent.reset({ files: {} });
    const step = await agent.step({ name: 'sh', params: { script: 'pwd' } });
    const hostDir = (step.observation as { stdout: string }).stdout.trim();
    // On the host, the command's folder is the workspace's real path (isolated, it is /workspace).
    expect(hostDir.startsWith(os.tmpdir())).toBe(true);
    expect(existsSync(path.join(hostDir, 'lib', 'base.txt'))).toBe(true);
    await agent.reset({ files: {} });
    expect(existsSync(hostDir)).toBe(false);
  });

  it('refuses definitions that would not work, naming each field', async () => {
    const bad = await defineEnv(
      manifest({
        sandbox: { listing_to: '/nowhere', files: 'missing-folder', allow_hosts: ['pypi.org', 'https://pypi.org'] },
        tools: { sh: { sandbox: { command: ['sh', '-c', '{scrpit}'] } }, echo: { sandbox: { command: ['echo', '{oops'] } } },
      }),
      { dir },
    ).catch((e: unknown) => e);
    expect(isAgentError(bad) && bad.code).toBe('DEFINITION_INVALID');
    const issues = (bad as { issues: { pointer: string; message: string }[] }).issues.map((i) => `${i.pointer}: ${i.message}`);
    expect(issues).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^\/sandbox\/files: no folder 'missing-folder'/),
        expect.stringMatching(/^\/sandbox\/listing_to: the state schema does not declare \/nowhere/),
        expect.stringMatching(/^\/sandbox\/allow_hosts\/1: 'https:\/\/pypi.org' is not a host/),
        expect.stringMatching(/^\/tools\/sh\/sandbox\/command\/2: \{scrpit\} is not a parameter of this action \(it has script\)/),
        expect.stringMatching(/^\/tools\/echo\/sandbox\/command\/1: .*opens no \{name\}/),
      ]),
    );
    const { sandbox: _none, ...withoutSandbox } = manifest();
    const orphan = await defineEnv(withoutSandbox, { dir }).catch((e: unknown) => e);
    expect((orphan as { issues: { pointer: string }[] }).issues.map((i) => i.pointer)).toEqual(['/tools/sh/sandbox', '/tools/echo/sandbox']);
  });

  it('reaches the hosts the env allows, and records them with how it isolates', async () => {
    const server = createServer((_req, res) => res.end('allowed'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      await using env = await open({ sandbox: { allow_hosts: [`127.0.0.1:${port}`] } });
      expect(env.sandbox).toMatchObject({ mode: 'isolated', allowed_hosts: [`127.0.0.1:${port}`] });
      const agent = env.createInstance();
      await agent.reset({ files: {} });
      const step = await agent.step({ name: 'sh', params: { script: `python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:${port}/").read().decode())'` } });
      expect((step.observation as { stdout: string }).stdout).toBe('allowed\n');
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('closing the env kills the commands still running and waits for them: nothing left running or writing', async () => {
    const env = await open();
    const marker = `closing-${process.pid}-${Date.now()}`;
    // Sixteen episodes at once, as an interrupted run has: their kills take longer than a tick to land.
    for (let i = 0; i < 16; i++) {
      const agent = env.createInstance();
      await agent.reset({ files: {} });
      agent.dispatch({ name: 'sh', params: { script: `while :; do echo ${marker} >> out.txt; done` } });
    }
    await vi.waitFor(() => expect(running(marker)).toBeGreaterThanOrEqual(16), { timeout: 10_000, interval: 20 });
    await env[Symbol.asyncDispose]();
    expect(env.runningCalls()).toEqual([]);
    expect(running(marker)).toBe(0);
  });

  it('keeps the listing out of the state with listing_to null', async () => {
    await using env = await open({ sandbox: { listing_to: null } });
    const agent = env.createInstance();
    await agent.reset({ files: {} });
    const step = await agent.step({ name: 'sh', params: { script: 'echo x > f' } });
    expect(step.state as JsonValue).toEqual({ files: {} });
  });
});
