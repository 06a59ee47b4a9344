/** The Host/Origin/token rules every server of the toolkit applies, and a worker's health endpoint under them. */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { guardRequest } from './http-guard.js';
import { serveWorkerHealth } from './worker-health.js';

function req(headers: Record<string, string>): IncomingMessage {
  return { headers } as unknown as IncomingMessage;
}

describe('guardRequest', () => {
  const loopback = { host: '127.0.0.1', token: 't0ken', open: new Set(['/health']) };

  it('lets its owner in: loopback names, same origin, the token', () => {
    for (const host of ['127.0.0.1:7070', 'localhost:7070', 'LOCALHOST', '[::1]:7070']) expect(guardRequest(req({ host, authorization: 'Bearer t0ken' }), '/events', loopback)).toBeUndefined();
    expect(guardRequest(req({ host: '127.0.0.1:7070', origin: 'http://127.0.0.1:7070', authorization: 'bearer t0ken' }), '/events', loopback)).toBeUndefined();
    expect(guardRequest(req({ host: '127.0.0.1:7070' }), '/health', loopback)).toBeUndefined();
  });

  it('refuses rebinding, cross-origin, a missing or wrong token, and bodies a browser may send freely', () => {
    expect(guardRequest(req({ host: 'evil.example:7070', authorization: 'Bearer t0ken' }), '/events', loopback)).toMatchObject({ status: 403 });
    expect(guardRequest(req({ host: '127.0.0.1.evil.example', authorization: 'Bearer t0ken' }), '/events', loopback)).toMatchObject({ status: 403 });
    expect(guardRequest(req({ host: '127.0.0.1:7070', origin: 'http://127.0.0.1:8080', authorization: 'Bearer t0ken' }), '/events', loopback)).toMatchObject({ status: 403 });
    expect(guardRequest(req({ host: '127.0.0.1:7070', origin: 'null', authorization: 'Bearer t0ken' }), '/events', loopback)).toMatchObject({ status: 403 });
    expect(guardRequest(req({ host: '127.0.0.1:7070', 'sec-fetch-site': 'same-site', authorization: 'Bearer t0ken' }), '/events', loopback)).toMatchObject({ status: 403 });
    expect(guardRequest(req({ host: '127.0.0.1:7070', authorization: 'Bearer t0ke' }), '/events', loopback)).toMatchObject({ status: 401 });
    expect(guardRequest(req({ host: '127.0.0.1:7070' }), '/events', loopback)).toMatchObject({ status: 401 });
    const form = req({ host: '127.0.0.1:7070', authorization: 'Bearer t0ken', 'content-type': 'application/x-www-form-urlencoded', 'content-length': '3' });
    expect(guardRequest(form, '/rewards', loopback)).toMatchObject({ status: 415 });
  });

  it('on a given address answers that address; on a wildcard any name', () => {
    expect(guardRequest(req({ host: '10.0.0.5:7070' }), '/x', { host: '10.0.0.5' })).toBeUndefined();
    expect(guardRequest(req({ host: 'localhost:7070' }), '/x', { host: '10.0.0.5' })).toMatchObject({ status: 403 });
    expect(guardRequest(req({ host: 'worker-3.pods:7070' }), '/x', { host: '0.0.0.0' })).toBeUndefined();
  });
});

describe("a worker's health endpoint", () => {
  it('answers probes and refuses a page in a browser', async () => {
    const health = await serveWorkerHealth(0, () => ({ ready: true, running: 2 }), { host: '127.0.0.1' });
    try {
      const base = `http://127.0.0.1:${health.port}`;
      expect(await (await fetch(`${base}/ready`)).json()).toEqual({ ready: true, running: 2 });
      expect((await fetch(`${base}/ready`, { headers: { origin: 'https://evil.example' } })).status).toBe(403);
    } finally {
      await health.close();
    }
  });
});
