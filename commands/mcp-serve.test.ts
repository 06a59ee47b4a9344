/** `agent mcp-serve` driven by the MCP SDK's own client, as an IDE agent would. */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
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
});
