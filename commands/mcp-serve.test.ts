/** `agent mcp-serve` driven by the MCP SDK's own client, as an IDE agent would. */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, describe, expect, it, vi } from 'vitest';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

describe('agent mcp-serve', () => {
  it('serves the enabled actions and reset as tools, the state as a resource, and records every call as a step', async () => {
    const out = await mkdtemp(path.join(os.tmpdir(), 'mcp-serve-'));
    dirs.push(out);
    const transport = new StdioClientTransport({ command: 'node', args: ['bin/agent.js', 'mcp-serve', 'fixtures/weather', '--out', out, '--tool-option', 'latency_scale=0.01'], stderr: 'pipe' });
    let stderr = '';
    transport.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(transport);
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['get_weather', 'reset']);
      const ok = await client.callTool({ name: 'get_weather', arguments: { city: '上海' } });
      expect(ok.isError).toBeFalsy();
      expect(ok.structuredContent).toMatchObject({ observation: { city: '上海', temperature: expect.any(Number) }, reward: expect.any(Number), done: false, step: 1, trace_id: 'ep-0:1' });
      // Refused without touching the episode: params that break the schema, an unknown tool.
      const bad = await client.callTool({ name: 'get_weather', arguments: { city: 7 } });
      expect(bad).toMatchObject({ isError: true, content: [{ type: 'text', text: expect.stringContaining("params of 'get_weather' do not match its schema") }] });
      expect((await client.callTool({ name: 'fly', arguments: {} })).content).toEqual([{ type: 'text', text: expect.stringContaining("'fly' is not available in the current state") }]);
      const state = await client.readResource({ uri: 'env://state' });
      expect(JSON.parse((state.contents[0] as { text: string }).text)).toMatchObject({ current_weather: { temperature: expect.any(Number) } });
      const reset = await client.callTool({ name: 'reset', arguments: {} });
      expect(reset.structuredContent).toMatchObject({ episode: 1 });
      expect((await client.callTool({ name: 'get_weather', arguments: { city: '北京' } })).structuredContent).toMatchObject({ step: 1, trace_id: 'ep-1:1' });
    } finally {
      await client.close();
    }
    // The client leaving ends the run; its folder holds what was done.
    const [runId] = await vi.waitFor(async () => {
      const ids = await readdir(out);
      await readFile(path.join(out, ids[0] as string, 'summary.json'));
      return ids;
    }, { timeout: 10_000, interval: 50 });
    expect(stderr).toContain('serving MCP on stdin/stdout');
    const steps = (await readFile(path.join(out, runId as string, 'trajectories.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { episode: number; action: string; params: unknown });
    expect(steps.map((s) => [s.episode, s.action, s.params])).toEqual([
      [0, 'get_weather', { city: '上海' }],
      [1, 'get_weather', { city: '北京' }],
    ]);
  });

  it('answers every request: an oversized message, params that are not an object, arguments nested 300,000 deep; lists actions at once; a cancelled queued call never runs', async () => {
    const out = await mkdtemp(path.join(os.tmpdir(), 'mcp-raw-'));
    dirs.push(out);
    const child = spawn(process.execPath, ['bin/agent.js', 'mcp-serve', 'fixtures/weather', '--out', out, '--tool-option', 'latency_scale=0.01'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const replies = new Map<unknown, Record<string, unknown>>();
    let buffered = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (c: string) => {
      buffered += c;
      for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
        const m = JSON.parse(buffered.slice(0, nl)) as Record<string, unknown>;
        buffered = buffered.slice(nl + 1);
        if ('id' in m) replies.set(m['id'], m);
      }
    });
    const send = (...messages: unknown[]): boolean => child.stdin.write(messages.map((m) => `${typeof m === 'string' ? m : JSON.stringify(m)}\n`).join(''));
    const reply = (id: unknown): Promise<Record<string, unknown>> => vi.waitFor(() => replies.get(id) ?? Promise.reject(new Error(`no reply to ${String(id)} yet`)), { timeout: 10_000, interval: 10 });
    try {
      // tools/list sent with initialize, before the run has started: it waits for the first state's actions.
      send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }, { jsonrpc: '2.0', method: 'notifications/initialized' }, { jsonrpc: '2.0', id: 2, method: 'tools/list' });
      expect(((await reply(2))['result'] as { tools: { name: string }[] }).tools.map((t) => t.name)).toEqual(['get_weather', 'reset']);
      send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: 'get_weather' });
      expect(await reply(3)).toMatchObject({ error: { code: -32602 } });
      send('{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_weather","arguments":{"city":"' + 'x'.repeat(5 * 1024 * 1024) + '"}}}');
      expect(await reply(4)).toMatchObject({ error: { code: -32600, message: expect.stringContaining('over 4194304 bytes') } });
      send('{not json');
      expect(await reply(null)).toMatchObject({ error: { code: -32700 } });
      // Two calls and the cancellation of the second in one write: the second is still queued when it is cancelled.
      send({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'get_weather', arguments: { city: 'Oslo' } } }, { jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'get_weather', arguments: { city: 'Lima' } } }, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 6, reason: 'changed my mind' } });
      expect(await reply(5)).toMatchObject({ result: { structuredContent: { step: 1 } } });
      send({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'get_weather', arguments: { city: 'Kyiv' } } });
      expect(await reply(7)).toMatchObject({ result: { structuredContent: { step: 2 } } });
      // Arguments nested 300,000 deep: answered with the limit, and the same episode goes on.
      send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"get_weather","arguments":{"city":${'['.repeat(300_000)}${']'.repeat(300_000)}}}}`);
      expect(await reply(8)).toMatchObject({ error: { code: -32600, message: expect.stringContaining('deeper than 512 levels') } });
      send({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'get_weather', arguments: { city: 'Rome' } } });
      expect(await reply(9)).toMatchObject({ result: { structuredContent: { step: 3, trace_id: 'ep-0:3' } } });
    } finally {
      child.stdin.end();
    }
    await new Promise((resolve) => child.once('exit', resolve));
    const [runId] = await readdir(out);
    const steps = (await readFile(path.join(out, runId as string, 'trajectories.jsonl'), 'utf8')).trim().split('\n').map((l) => (JSON.parse(l) as { params: { city: string } }).params.city);
    expect(steps).toEqual(['Oslo', 'Kyiv', 'Rome']);
  });
});
