/** The run server lets in only its owner, answers bad input with what is wrong, and stays up under clients that never read. */
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RewardLedger, type RewardDelivery } from '../reward/ledger.js';
import type { RewardSourceDefinition } from '../schema/definition.js';
import { Emitter } from '../shared/emitter.js';
import { RunServer, type RunServerOptions } from './run-server.js';

const TOKEN = 'a-test-token-of-enough-length';

/** Rewards over a real ledger with one step open (trace ep-0:1), recording what landed: a refused request must land nothing. */
function fakeRewards(): { rewards: RunServerOptions['rewards']; submitted: unknown[] } {
  const submitted: unknown[] = [];
  const source: RewardSourceDefinition = { name: 's', schema: { type: 'number' }, delayMs: 1_000, aggregation: 'sum', weight: 1, binding: { kind: 'external' } };
  const ledger = new RewardLedger(new Map([['s', source]]), { now: () => 0 });
  ledger.open({ traceId: 'ep-0:1', instanceId: 'ep-0', episode: 0, step: 1, action: 'act', time: 0 }, 0);
  const rewards = {
    ledger,
    submit(d: RewardDelivery) {
      // The idempotency key makes every test delivery land (not a duplicate of the last).
      const result = ledger.deliver({ ...d, key: String(submitted.length) });
      submitted.push(d);
      return result;
    },
  };
  return { rewards: rewards as unknown as RunServerOptions['rewards'], submitted };
}

const servers: RunServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s[Symbol.asyncDispose]()));
});

async function start(extra: Partial<RunServerOptions> = {}): Promise<{ server: RunServer; submitted: unknown[]; events: Emitter<{ type: string; pad?: string }> }> {
  const { rewards, submitted } = fakeRewards();
  const events = new Emitter<{ type: string; pad?: string }>();
  const server = await RunServer.start({ port: 0, runId: 'r', rewards, events, token: TOKEN, initialState: (id) => (id === 'initial-0' ? { count: 0 } : undefined), ...extra });
  servers.push(server);
  return { server, submitted, events };
}

/** A raw HTTP request (fetch would not let a test set Host). */
function raw(port: number, options: { method?: string; path: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: options.method ?? 'GET', path: options.path, headers: options.headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

const auth = { authorization: `Bearer ${TOKEN}` };
const json = { ...auth, 'content-type': 'application/json' };

describe('who gets in', () => {
  it('refuses a web page posting rewards (text/plain, foreign Origin and Host): nothing lands', async () => {
    const { server, submitted } = await start();
    const body = JSON.stringify({ trace_id: 'ep-0:1', source: 's', value: 1 });
    const csrf = await raw(server.port, { method: 'POST', path: '/rewards', headers: { 'content-type': 'text/plain', origin: 'https://evil.example', host: `evil.example:${server.port}` }, body });
    expect(csrf.status).toBe(403);
    // Even with the token, a cross-origin browser request is refused.
    const withToken = await raw(server.port, { method: 'POST', path: '/rewards', headers: { ...json, origin: 'https://evil.example' }, body });
    expect(withToken.status).toBe(403);
    expect(JSON.parse(withToken.body)).toMatchObject({ error: expect.stringContaining('cross-origin') });
    const fetchSite = await raw(server.port, { method: 'POST', path: '/rewards', headers: { ...json, 'sec-fetch-site': 'cross-site' }, body });
    expect(fetchSite.status).toBe(403);
    expect(submitted).toEqual([]);
  });

  it('refuses a foreign Host on every route (DNS rebinding), /health included', async () => {
    const { server } = await start();
    for (const path of ['/events', '/states/initial-0', '/progress', '/health']) {
      expect((await raw(server.port, { path, headers: { ...auth, host: `attacker.example:${server.port}` } })).status).toBe(403);
    }
    expect((await raw(server.port, { path: '/states/initial-0', headers: { ...auth, host: `localhost:${server.port}` } })).status).toBe(200);
  });

  it('needs the token on every route but /health', async () => {
    const { server, submitted } = await start();
    expect((await raw(server.port, { path: '/health' })).status).toBe(200);
    for (const path of ['/events', '/states/initial-0', '/progress']) expect((await raw(server.port, { path })).status).toBe(401);
    const wrong = await raw(server.port, { method: 'POST', path: '/rewards', headers: { authorization: 'Bearer nope', 'content-type': 'application/json' }, body: '{}' });
    expect(wrong.status).toBe(401);
    expect(JSON.parse(wrong.body)).toMatchObject({ error: expect.stringContaining('Authorization: Bearer') });
    expect(submitted).toEqual([]);
  });

  it('takes JSON or JSON lines only (415 otherwise)', async () => {
    const { server, submitted } = await start();
    const body = JSON.stringify({ trace_id: 'ep-0:1', source: 's', value: 1 });
    expect((await raw(server.port, { method: 'POST', path: '/rewards', headers: { ...auth, 'content-type': 'text/plain' }, body })).status).toBe(415);
    expect((await raw(server.port, { method: 'POST', path: '/rewards', headers: { ...auth, 'content-type': 'application/x-ndjson' }, body })).status).toBe(200);
    expect(submitted).toHaveLength(1);
  });

  it('serves off loopback only with a token, and generates one on loopback', async () => {
    const { rewards } = fakeRewards();
    await expect(RunServer.start({ port: 0, runId: 'r', rewards, host: '0.0.0.0' })).rejects.toMatchObject({ code: 'BAD_USAGE', hint: expect.stringContaining('--token') });
    const open = await RunServer.start({ port: 0, runId: 'r', rewards, host: '0.0.0.0', token: TOKEN });
    servers.push(open);
    // A wildcard bind cannot know its names: any Host, but the token still rules.
    expect((await raw(open.port, { path: '/progress', headers: { host: `node-7.cluster:${open.port}` } })).status).toBe(401);
    const local = await RunServer.start({ port: 0, runId: 'r', rewards });
    servers.push(local);
    expect(local.token).toMatch(/^[\w-]{32}$/);
    expect(local.url).toBe(`http://127.0.0.1:${local.port}`);
  });
});

describe('bad input', () => {
  it('answers an item with a field of the wrong type with 400 naming the item and the field', async () => {
    const { server } = await start();
    const res = await raw(server.port, { method: 'POST', path: '/rewards', headers: json, body: JSON.stringify([{ trace_id: 'ep-0:1', source: 's', value: 1 }, { instance_id: { toString: 1 }, source: 's', value: 1 }]) });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ results: [{ index: 0, ok: true }, { index: 1, ok: false, pointer: '/instance_id' }] });
  });

  it('answers a malformed percent-escape with 400, and takes a pretty-printed object', async () => {
    const { server, submitted } = await start();
    const bad = await raw(server.port, { path: '/states/%E0%A4%A', headers: auth });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body)).toMatchObject({ error: expect.stringContaining('percent-escape') });
    const pretty = await raw(server.port, { method: 'POST', path: '/rewards', headers: json, body: JSON.stringify({ trace_id: 'ep-0:1', source: 's', value: 1 }, null, 2) });
    expect(pretty.status).toBe(200);
    const lines = await raw(server.port, { method: 'POST', path: '/rewards', headers: json, body: '{"trace_id":"a","source":"s","value":1}\n{"trace_id":"b",' });
    expect(lines.status).toBe(400);
    expect(JSON.parse(lines.body)).toMatchObject({ error: expect.stringContaining('line 2') });
    expect(submitted).toHaveLength(1);
  });
});

describe('clients that never read', () => {
  /** A client that sends its request and never reads a byte. */
  function stalled(port: number): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(`GET /events HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
        socket.pause();
        resolve(socket);
      });
      socket.on('error', reject);
    });
  }

  it('holds a bounded buffer per client, caps clients, cuts off one that falls out of the ring, and /health answers', async () => {
    const dropped: string[] = [];
    const { server, events } = await start({ replay: 2_000, maxSubscribers: 20, onClientDropped: (r) => dropped.push(r) });
    const pad = 'x'.repeat(20_000);
    // 2,000 events of 20 kB in the ring (40 MB): each late joiner used to be handed all of it at once.
    for (let i = 0; i < 2_000; i++) events.emit({ type: 'tick', pad });
    const before = process.memoryUsage().rss;
    const sockets = await Promise.all(Array.from({ length: 20 }, () => stalled(server.port)));
    try {
      await new Promise((r) => setImmediate(r));
      expect((await raw(server.port, { path: '/health' })).status).toBe(200);
      // 20 clients × 40 MB would be 800 MB; bounded, they hold a few kernel buffers' worth.
      expect(process.memoryUsage().rss - before).toBeLessThan(200 * 1024 * 1024);
      expect((await raw(server.port, { path: '/events', headers: auth })).status).toBe(503);
      // The ring turns over past what the stalled clients have read: they are cut off, with the reason.
      for (let i = 0; i < 2_000; i++) events.emit({ type: 'tick', pad });
      // Clients are written (and cut off) at the next flush, not inside the emit.
      await vi.waitFor(() => expect(dropped).toHaveLength(20), { timeout: 5_000, interval: 5 });
      expect(dropped[0]).toMatch(/fell more than 2000 events behind on \/events: cut off/);
      expect((await raw(server.port, { path: '/health' })).status).toBe(200);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });

  it('clients that read get every event in order, in batches shared round-robin, while stalled ones hold their place', async () => {
    const { server, events } = await start({ replay: 5_000, maxSubscribers: 8 });
    const sockets = await Promise.all(Array.from({ length: 4 }, () => stalled(server.port)));
    const readers = Array.from({ length: 3 }, () => {
      const seen: number[] = [];
      let text = '';
      const socket = connect(server.port, '127.0.0.1', () => socket.write(`GET /events HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`));
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        text += chunk;
        for (let m = /\nid: (\d+)\n/.exec(text); m; m = /\nid: (\d+)\n/.exec(text)) {
          seen.push(Number(m[1]));
          text = text.slice(m.index + m[0].length);
        }
      });
      return { socket, seen };
    });
    try {
      // A reader that connects late is replayed the ring (5,000 deep), so none misses the start.
      // 4,000 events of 2 kB: 8 MB for each reader, many flushes of at most 1 MB for all of them together.
      const pad = 'x'.repeat(2_000);
      for (let i = 0; i < 4_000; i++) events.emit({ type: 'tick', pad });
      await vi.waitFor(() => expect(readers.map((r) => r.seen.length)).toEqual([4_000, 4_000, 4_000]), { timeout: 20_000, interval: 20 });
      for (const r of readers) expect(r.seen).toEqual(Array.from({ length: 4_000 }, (_, i) => i + 1));
      expect((await raw(server.port, { path: '/health' })).status).toBe(200);
    } finally {
      for (const s of [...sockets, ...readers.map((r) => r.socket)]) s.destroy();
    }
  });
});
