import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { RawData, WebSocket } from 'ws';
import { WsPeer } from './ws-peer.js';

/** A socket whose peer reads only when told: what the server has queued to it is `bufferedAmount`. */
class FakeSocket extends EventEmitter {
  readonly OPEN = 1;
  readyState = 1;
  bufferedAmount = 0;
  paused = false;
  pings = 0;
  terminated = false;
  readonly #flushed: (() => void)[] = [];
  send(text: string, cb: () => void): void {
    this.bufferedAmount += text.length;
    this.#flushed.push(cb);
  }
  /** The peer reads everything queued so far. */
  read(): void {
    this.bufferedAmount = 0;
    for (const cb of this.#flushed.splice(0)) cb();
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  ping(): void {
    this.pings++;
  }
  terminate(): void {
    this.terminated = true;
    this.readyState = 3;
  }
  close(): void {}
}

const raw = (text: string): RawData => Buffer.from(text);

describe('WsPeer', () => {
  it('lets a request behind long streams through once the streams gave their places back (a cancel behind 32 rollouts)', async () => {
    const ws = new FakeSocket();
    const handled: string[] = [];
    const streams: (() => void)[] = [];
    new WsPeer(ws as unknown as WebSocket, {
      highWater: 1 << 20,
      lowWater: 1 << 18,
      maxInFlight: 2,
      maxMessageBytes: 1 << 20,
      onMessage: async (message, _binary, release) => {
        const text = String(message);
        handled.push(text);
        if (text !== 'stream') return;
        release();
        // A stream that runs until the test ends it.
        await new Promise<void>((resolve) => streams.push(resolve));
      },
    });
    for (let i = 0; i < 5; i++) ws.emit('message', raw('stream'), false);
    ws.emit('message', raw('cancel'), false);
    for (let i = 0; i < 10; i++) await Promise.resolve();
    expect(handled).toEqual(['stream', 'stream', 'stream', 'stream', 'stream', 'cancel']);
    for (const end of streams) end();
  });

  it('answers a peer that never reads only up to its queue: the rest waits unread, and all of it is answered once it reads', async () => {
    const ws = new FakeSocket();
    let handled = 0;
    const peer: WsPeer = new WsPeer(ws as unknown as WebSocket, {
      highWater: 1_000,
      lowWater: 250,
      maxInFlight: 4,
      maxMessageBytes: 1 << 20,
      onMessage: async () => {
        handled++;
        await Promise.resolve();
        peer.send('x'.repeat(300));
      },
    });
    for (let i = 0; i < 2_000; i++) ws.emit('message', raw('{"type":"state"}'), false);
    for (let i = 0; i < 10; i++) await Promise.resolve();
    // 300-byte replies: the fourth passes 1,000 bytes, then nothing more is handled and the socket is not read.
    expect(handled).toBe(4);
    expect(ws.paused).toBe(true);
    expect(ws.bufferedAmount).toBeLessThanOrEqual(1_000 + 4 * 300);
    while (handled < 2_000) {
      ws.read();
      for (let i = 0; i < 10; i++) await Promise.resolve();
    }
    ws.read();
    expect(ws.paused).toBe(false);
  });

  it('pings a quiet peer and cuts off one from which nothing came for the timeout', () => {
    const ws = new FakeSocket();
    const peer = new WsPeer(ws as unknown as WebSocket, { highWater: 1_000, lowWater: 250, maxInFlight: 4, maxMessageBytes: 1 << 20, onMessage: () => Promise.resolve() });
    const start = performance.now();
    expect(peer.check(start + 100, 1_000)).toBe(false);
    expect(ws.pings).toBe(0);
    expect(peer.check(start + 400, 1_000)).toBe(false);
    expect(ws.pings).toBe(1);
    ws.emit('pong');
    expect(peer.check(performance.now() + 900, 1_000)).toBe(false);
    expect(ws.terminated).toBe(false);
    expect(peer.check(performance.now() + 1_100, 1_000)).toBe(true);
    expect([ws.terminated, peer.lost]).toEqual([true, true]);
  });
});
