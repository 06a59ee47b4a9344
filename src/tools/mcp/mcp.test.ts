/**
 * MCP servers as tools, against the reference servers from npm (filesystem, memory, everything)
 * over stdio and Streamable HTTP, and a test server of ours with planted behaviours
 * (fixtures/mcp-test-server): import, calls through the resilience stack, isError, outputSchema,
 * crash and restart, cancellation, per-instance servers, list_changed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AgentEnv, defineEnv, Fuzzer, type EnvEvent, type EnvManifest } from '../../internal.js';
import { runAgent } from '../../../commands/testing.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const BIN = path.join(ROOT, 'node_modules/.bin');
const TEST_SERVER = ['node', path.join(ROOT, 'fixtures/mcp-test-server/server.mjs')];

const envs: AgentEnv[] = [];
afterAll(async () => {
  await Promise.all(envs.map((e) => e.close()));
});

async function env(manifest: Omit<EnvManifest, 'actions'> & Partial<Pick<EnvManifest, 'actions'>>, events?: EnvEvent[]): Promise<AgentEnv> {
  const def = await defineEnv({ state: { type: 'object' }, initial_states: [{}], ...manifest } as EnvManifest, { dir: ROOT });
  const e = await AgentEnv.create(def);
  if (events) e.events.onAny((ev) => events.push(ev));
  envs.push(e);
  return e;
}

async function step(e: AgentEnv, name: string, params: Record<string, unknown> = {}, instance = e.createInstance()) {
  if (instance.status === 'created') await instance.reset({});
  return instance.resolve(instance.dispatch({ name, params: params as never }), { timeoutMs: 20_000 });
}

describe('importing the reference servers', () => {
  it('imports every tool of filesystem, memory and everything (stdio) as actions, inputSchema as parameters', async () => {
    const sandbox = await mkdtemp(path.join(os.tmpdir(), 'mcp-fs-'));
    try {
      const e = await env({
        mcp_servers: { fs: { command: [path.join(BIN, 'mcp-server-filesystem'), sandbox] }, memory: { command: [path.join(BIN, 'mcp-server-memory')], env: { MEMORY_FILE_PATH: path.join(sandbox, 'memory.jsonl') } }, everything: { command: [path.join(BIN, 'mcp-server-everything'), 'stdio'] } },
        actions_from: ['fs', 'memory', { server: 'everything', prefix: 'ev_' }],
      });
      const names = [...e.definition.actions.keys()];
      expect(names.length).toBe(14 + 9 + 13);
      expect(names).toEqual(expect.arrayContaining(['read_text_file', 'write_file', 'create_entities', 'read_graph', 'ev_echo', 'ev_get-sum', 'ev_get-structured-content']));
      expect(e.definition.actions.get('write_file')?.binding).toEqual({ kind: 'mcp', server: 'fs', tool: 'write_file', imported: true });
      expect(e.definition.actions.get('ev_echo')?.binding).toEqual({ kind: 'mcp', server: 'everything', tool: 'echo', imported: true });
      // Calls: a write then a read through the filesystem server; an entity into memory and back.
      const agent = e.createInstance();
      await agent.reset({});
      expect((await step(e, 'write_file', { path: path.join(sandbox, 'a.txt'), content: 'hello' }, agent)).info.status).toBe('resolved');
      const read = await step(e, 'read_text_file', { path: path.join(sandbox, 'a.txt') }, agent);
      expect(read.observation).toEqual({ content: 'hello' });
      await step(e, 'create_entities', { entities: [{ name: 'paris', entityType: 'city', observations: ['sunny'] }] }, agent);
      expect(((await step(e, 'open_nodes', { names: ['paris'] }, agent)).observation as { entities: unknown[] }).entities).toEqual([{ name: 'paris', entityType: 'city', observations: ['sunny'] }]);
      expect((await step(e, 'ev_get-sum', { a: 2, b: 3 }, agent)).observation).toBe('The sum of 2 and 3 is 5.');
      // structuredContent validated against the tool's outputSchema (it holds here).
      expect((await step(e, 'ev_get-structured-content', { location: 'New York' }, agent)).observation).toMatchObject({ temperature: expect.any(Number) });
    } finally {
      await rm(sandbox, { recursive: true, force: true });
    }
  });

  it('filters and renames an import, and names what does not exist', async () => {
    const e = await env({ mcp_servers: { t: { command: TEST_SERVER } }, actions_from: [{ server: 't', include: ['add', 'fail'], rename: { add: 'plus' } }] });
    expect([...e.definition.actions.keys()]).toEqual(['plus', 'fail']);
    await expect(env({ mcp_servers: { t: { command: TEST_SERVER } }, actions_from: [{ server: 't', include: ['nope'] }, { server: 'zz' }] })).rejects.toMatchObject({
      code: 'DEFINITION_INVALID',
      issues: [expect.objectContaining({ pointer: '/actions_from/0/include/0', message: expect.stringContaining("has no tool 'nope'") }), expect.objectContaining({ pointer: '/actions_from/1/server', message: expect.stringContaining("no MCP server 'zz'") })],
    });
  });

  it('a server that never initializes is a typed error with its stderr', async () => {
    await expect(env({ mcp_servers: { t: { command: TEST_SERVER, env: { MCP_TEST_FAIL_START: '1' } } }, actions_from: 't' })).rejects.toMatchObject({
      code: 'DEFINITION_INVALID',
      issues: [expect.objectContaining({ pointer: '/mcp_servers/t', message: expect.stringMatching(/did not initialize[\s\S]*refusing to start \(MCP_TEST_FAIL_START\)/) })],
    });
  });
});

describe('calls', () => {
  it('isError is TOOL_FAILED with the text; a result that breaks its outputSchema is TOOL_CONTRACT with the pointer', async () => {
    const e = await env({ mcp_servers: { t: { command: TEST_SERVER } }, actions_from: 't' });
    const failed = await step(e, 'fail', { why: 'the disk is full' });
    expect(failed.info.error).toMatchObject({ code: 'TOOL_FAILED', message: "tool 'fail': it failed: the disk is full" });
    const bad = await step(e, 'bad_output');
    expect(bad.info.error).toMatchObject({ code: 'TOOL_CONTRACT', issues: [{ pointer: '/sum', message: 'must be number' }] });
    expect((await step(e, 'add', { a: 1, b: 2 })).observation).toEqual({ sum: 3 });
  });

  it('caps a reply (max_output_bytes), and a server that hangs in initialize fails after startup_timeout_ms with a typed error', async () => {
    const e = await env({ mcp_servers: { t: { command: TEST_SERVER } }, actions_from: [{ server: 't', include: ['flood'] }], tools: { flood: { max_output_bytes: 1_000 } } });
    expect((await step(e, 'flood', { n: 900 })).info.status).toBe('resolved');
    expect((await step(e, 'flood', { n: 5_000 })).info.error).toMatchObject({ code: 'TOOL_OUTPUT_TOO_LARGE', message: expect.stringContaining('more than 1000') });
    await expect(env({ mcp_servers: { hang: { command: ['node', '-e', 'setInterval(() => {}, 1000)'], startup_timeout_ms: 300 } }, actions_from: 'hang' })).rejects.toMatchObject({
      issues: [expect.objectContaining({ pointer: '/mcp_servers/hang', message: expect.stringContaining('did not initialize: no answer in 300 ms') })],
    });
  });

  it("a traced run's call carries its traceparent in _meta", async () => {
    const def = await defineEnv({ state: { type: 'object' }, initial_states: [{}], mcp_servers: { t: { command: TEST_SERVER } }, actions_from: [{ server: 't', include: ['trace_context'] }] } as EnvManifest, { dir: ROOT });
    const e = await AgentEnv.create(def, { traceparent: (traceId) => `00-${'a'.repeat(32)}-${traceId === 'agent-1:1' ? 'b'.repeat(16) : 'c'.repeat(16)}-01` });
    envs.push(e);
    expect((await step(e, 'trace_context')).observation).toEqual({ traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` });
    // Untraced, nothing is sent.
    expect((await step(await env({ mcp_servers: { t: { command: TEST_SERVER } }, actions_from: [{ server: 't', include: ['trace_context'] }] }), 'trace_context')).observation).toEqual({ traceparent: null });
  });

  it('writes a result into the state with result_to (MCP tools produce state deltas)', async () => {
    const e = await env({ state: { type: 'object', properties: { total: { type: 'object' } } }, mcp_servers: { t: { command: TEST_SERVER } }, actions_from: 't', tools: { add: { result_to: '/total' } } });
    const r = await step(e, 'add', { a: 20, b: 22 });
    expect(r.state).toEqual({ total: { sum: 42 } });
    expect(r.info.seq).toBe(1);
  });

  it('restarts a crashed server: the crash is a retryable TOOL_CRASHED with its stderr, the next call finds a new server', async () => {
    const events: EnvEvent[] = [];
    const e = await env({ mcp_servers: { t: { command: TEST_SERVER } }, actions_from: 't' }, events);
    const before = (await step(e, 'pid')).observation as { pid: number };
    const crashed = await step(e, 'crash');
    expect(crashed.info.error).toMatchObject({ code: 'TOOL_CRASHED', retryable: true, message: expect.stringContaining('crashing on purpose') });
    const after = (await step(e, 'pid')).observation as { pid: number };
    expect(after.pid).not.toBe(before.pid);
  });

  it('a timeout cancels the call: the server gets notifications/cancelled', async () => {
    const e = await env({ mcp_servers: { t: { command: TEST_SERVER } }, actions_from: 't', tools: { wait: { timeout_ms: 200 } } });
    const agent = e.createInstance();
    await agent.reset({});
    expect((await step(e, 'wait', {}, agent)).info.error).toMatchObject({ code: 'TOOL_TIMEOUT' });
    await vi.waitFor(async () => expect((await step(e, 'cancellations', {}, agent)).observation).toEqual({ cancelled: 1 }), { timeout: 5_000, interval: 20 });
  });

  it('per_instance: each instance its own server, closed when the instance is released', async () => {
    const e = await env({ mcp_servers: { t: { command: TEST_SERVER, per_instance: true } }, actions_from: 't' });
    const [a, b] = [e.createInstance(), e.createInstance()];
    const pa = ((await step(e, 'pid', {}, a)).observation as { pid: number }).pid;
    const pb = ((await step(e, 'pid', {}, b)).observation as { pid: number }).pid;
    expect(pa).not.toBe(pb);
    expect(((await step(e, 'pid', {}, a)).observation as { pid: number }).pid).toBe(pa);
    await a.terminate('done');
    e.release(a.id);
    await vi.waitFor(() => expect(() => process.kill(pa, 0)).toThrow(), { timeout: 5_000, interval: 20 });
    expect(() => process.kill(pb, 0)).not.toThrow();
  });

  it('list_changed: imported actions follow the tool list (added, dropped, new parameters), reported with a schema diff', async () => {
    const events: EnvEvent[] = [];
    const e = await env({ mcp_servers: { t: { command: TEST_SERVER } }, actions_from: 't' }, events);
    const agent = e.createInstance();
    await agent.reset({});
    await step(e, 'grow', {}, agent);
    await vi.waitFor(() => expect(events.find((x) => x.type === 'mcp_tools_changed')).toMatchObject({ server: 't', added: ['extra_11'], removed: [], changed: [], actions: { added: ['extra_11'], removed: [], changed: [] } }), { timeout: 5_000, interval: 20 });
    expect(agent.availableActions().map((a) => a.name)).toContain('extra_11');
    expect((await step(e, 'extra_11', {}, agent)).info.error).toMatchObject({ code: 'TOOL_FAILED', message: expect.stringContaining('no tool extra_11') });
    await step(e, 'retype', {}, agent);
    await vi.waitFor(() => expect(events.filter((x) => x.type === 'mcp_tools_changed')).toHaveLength(2), { timeout: 5_000, interval: 20 });
    expect(events.filter((x) => x.type === 'mcp_tools_changed')[1]).toMatchObject({ removed: ['fail'], changed: [{ tool: 'add', findings: expect.arrayContaining([expect.objectContaining({ rule: 'required-added', severity: 'breaking', message: expect.stringContaining("property 'c' is now required") })]) }], actions: { removed: ['fail'], changed: ['add'] } });
    expect(e.definition.actions.has('fail')).toBe(false);
    // The old params break the new schema: refused before anything is sent.
    expect(() => agent.dispatch({ name: 'add', params: { a: 1, b: 2 } })).toThrow(/params of 'add' do not match its schema/);
    expect((await step(e, 'add', { a: 1, b: 2, c: 3 }, agent)).observation).toEqual({ sum: 3 });
  });
});

describe('Streamable HTTP', () => {
  let server: ChildProcess | undefined;
  let port = 0;
  beforeAll(async () => {
    port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    server = spawn(path.join(BIN, 'mcp-server-everything'), ['streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      server?.stderr?.on('data', (c: Buffer) => c.toString().includes('listening') && resolve());
      server?.once('exit', (code) => reject(new Error(`everything exited with ${code}`)));
    });
  });
  afterAll(() => {
    server?.kill();
  });

  it('imports and calls the everything server over Streamable HTTP', async () => {
    const e = await env({ mcp_servers: { remote: { url: `http://127.0.0.1:${port}/mcp` } }, actions_from: 'remote' });
    expect(e.definition.actions.size).toBe(13);
    expect((await step(e, 'echo', { message: 'over http' })).observation).toBe('Echo: over http');
  });
});

describe('agent fuzz on the reference servers', () => {
  it('finds nothing wrong on our side; what it finds in theirs (stateful tools, a long operation) is reported', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'mcp-fuzz-'));
    try {
      await mkdir(path.join(dir, 'sandbox'));
      await writeFile(
        path.join(dir, 'env.json'),
        JSON.stringify({
          name: 'mcp-reference',
          state: { type: 'object' },
          initial_states: [{}],
          mcp_servers: { fs: { command: [path.join(BIN, 'mcp-server-filesystem'), './sandbox'] }, memory: { command: [path.join(BIN, 'mcp-server-memory')], env: { MEMORY_FILE_PATH: path.join(dir, 'memory.jsonl') } }, everything: { command: [path.join(BIN, 'mcp-server-everything'), 'stdio'] } },
          actions_from: ['fs', 'memory', { server: 'everything', prefix: 'ev_' }],
        }),
      );
      await using fuzzer = await Fuzzer.prepare({ env: dir, runs: 150, seed: 0, storeDir: path.join(dir, '.fuzz'), shrinkBudgetMs: 500, toolTimeoutMs: 1_000, replaySaved: false });
      const summary = await fuzzer.run(new AbortController().signal);
      expect(summary.cases).toBe(150);
      // The servers keep state of their own (a knowledge graph, logging toggles): not deterministic, by design.
      const theirs = (f: { check: string; action: string }): boolean => f.check === 'deterministic' || (f.check === 'no-timeout' && f.action === 'ev_trigger-long-running-operation');
      expect(summary.failures.filter((f) => !theirs(f)).map((f) => f.signature)).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('agent fuzz on a server slow to start', () => {
  it('does not count the start-up, which the tool timeout does not count either, as a call outliving its timeout', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'mcp-slow-'));
    try {
      // One server per instance, so the fuzz case's own call waits for a fresh server to start.
      const manifest = { name: 'slow-start', state: { type: 'object' }, initial_states: [{}], mcp_servers: { t: { command: TEST_SERVER, per_instance: true, env: { MCP_TEST_START_DELAY_MS: '1200' } } }, actions_from: 't' };
      await writeFile(path.join(dir, 'env.json'), JSON.stringify(manifest));
      await using fuzzer = await Fuzzer.prepare({ env: dir, actions: ['add'], runs: 1, invalidRatio: 0, checks: ['no-timeout'], storeDir: path.join(dir, '.fuzz'), toolTimeoutMs: 50, replaySaved: false });
      const summary = await fuzzer.run(new AbortController().signal);
      expect(summary.cases).toBe(1);
      expect(summary.failures).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('fixtures/mcp-files', () => {
  it('agent run with the explore policy lists the sandbox and reads a file into the state', async () => {
    const out = await mkdtemp(path.join(os.tmpdir(), 'mcp-run-'));
    try {
      const r = await runAgent(['run', 'fixtures/mcp-files', '--episodes', '2', '--policy', 'fixtures/mcp-files/explore.ts', '--out', out]);
      expect(r.code, r.stderr).toBe(0);
      const [runId] = await readdir(out);
      const steps = (await readFile(path.join(out, runId as string, 'trajectories.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { action: string; status: string; state_after?: unknown });
      expect(steps.map((s) => s.action).sort()).toEqual(['list_directory', 'list_directory', 'read_text_file', 'read_text_file']);
      expect(steps.every((s) => s.status === 'resolved')).toBe(true);
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  it('runs: list the sandbox, then read a file into the state (read_text_file enabled once there is a listing)', async () => {
    const e = await AgentEnv.open(path.join(ROOT, 'fixtures/mcp-files'));
    envs.push(e);
    const agent = e.createInstance();
    await agent.reset({});
    expect(agent.availableActions().map((a) => a.name)).not.toContain('read_text_file');
    const listed = await step(e, 'list_directory', { path: '.' }, agent);
    expect((listed.state as { listing: { content: string } }).listing.content).toContain('[FILE] weather.txt');
    expect(agent.availableActions().map((a) => a.name)).toContain('read_text_file');
    const read = await step(e, 'read_text_file', { path: 'weather.txt' }, agent);
    expect(read.state).toMatchObject({ last_read: { content: expect.stringContaining('Paris: sunny') } });
  });
});
