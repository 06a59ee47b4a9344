/** `agent serve --store redis://…`: served episodes keep their states in Redis; stopping the server ends the run, and leaves no key behind. */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { sharedRedisAvailable, TEST_REDIS_URL } from '../state/redis-testing.js';
import { serveEnv } from './serve.js';

const available = await sharedRedisAvailable('agent serve --store tests');
const admin = new Redis(TEST_REDIS_URL, { lazyConnect: !available });
afterAll(async () => {
  if (available) await admin.quit();
  else admin.disconnect();
});

/** One request, then its reply. */
function ask(ws: WebSocket, message: object): Promise<{ type: string; data: Record<string, unknown> }> {
  return new Promise((resolve) => {
    ws.once('message', (raw) => resolve(JSON.parse(String(raw)) as { type: string; data: Record<string, unknown> }));
    ws.send(JSON.stringify(message));
  });
}

describe.runIf(available)('agent serve --store redis://…', () => {
  it('keeps served states in Redis while they run; stopping the server completes the run and removes its keys', async () => {
    const controller = new AbortController();
    let ready!: (v: { url: string; runId: string }) => void;
    const listening = new Promise<{ url: string; runId: string }>((r) => (ready = r));
    const done = serveEnv({ env: 'fixtures/weather', listen: 0, store: TEST_REDIS_URL, out: await mkdtemp(path.join(tmpdir(), 'agent-serve-')), onListening: ready }, controller.signal);
    const { url, runId } = await listening;
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`);
    await new Promise((r) => ws.once('open', r));
    await ask(ws, { type: 'reset' });
    expect(await ask(ws, { type: 'step', data: { name: 'get_weather', params: { city: 'Paris' } } })).toMatchObject({ data: { info: { status: 'resolved' } } });
    expect(await admin.keys(`agent:${runId}:{ep-0}:*`)).not.toEqual([]);
    // Stopped with a session still open: its episode ends interrupted, and the run is over (Ctrl-C is a served run's normal end; only a crash leaves it to resume).
    controller.abort();
    const summary = await done;
    ws.terminate();
    expect(summary.status).toBe('completed');
    expect(summary.episodes.by_reason).toEqual({ interrupted: 1 });
    expect(await admin.keys(`agent:${runId}:*`)).toEqual([]);
  });
});
