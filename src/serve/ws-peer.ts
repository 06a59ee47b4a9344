/**
 * One WebSocket peer of `agent serve`, kept within bounds whatever it does:
 * - **What it has not read is bounded in bytes.** Past `highWater` bytes queued to it, its next
 *   requests wait and its socket is no longer read (TCP pushes back on the peer); reading goes on
 *   once the queue is under `lowWater`. A peer that sends 2,000 `state` requests and never reads
 *   holds one queue's worth of replies, not 2,000.
 * - **Requests at once are bounded too** (`maxInFlight`): a reply's size is known only once it is
 *   made, so the requests being answered are what keeps the queue from overshooting. A stream
 *   (rollouts) gives its place back once it is accepted: its messages are bounded in bytes above.
 * - **A peer that stops answering is lost.** A quiet peer is pinged; one from which nothing came
 *   (no message, no pong) for `timeoutMs` is cut off. A peer that stopped reading is not read
 *   either, so its pongs go unseen and it is lost the same way: no slot is held forever.
 * - **A message over the limit is refused with 1009 and the limit**, not a bare close.
 */
import type { RawData, WebSocket } from 'ws';

export interface PeerOptions {
  /** Bytes queued to the peer past which its requests wait and its socket is not read. */
  readonly highWater: number;
  /** Reading goes on once the queue is under this many bytes. */
  readonly lowWater: number;
  /** Requests being answered at once; the next ones wait their turn, in order. */
  readonly maxInFlight: number;
  /** The largest message the server takes (the WebSocket server's `maxPayload`), said in the 1009 close. */
  readonly maxMessageBytes: number;
  /**
   * Handles one message; resolves once it is answered. A long request (a rollouts stream) calls
   * `release` once it no longer needs its place among the requests at once: a `cancel` behind it
   * must not wait for it to end.
   */
  readonly onMessage: (raw: RawData, isBinary: boolean, release: () => void) => Promise<void>;
}

/** Messages read but not yet handled at which the socket stops being read. */
const MAX_HELD = 256;

export class WsPeer {
  readonly ws: WebSocket;
  readonly #o: PeerOptions;
  readonly #held: [RawData, boolean][] = [];
  #inFlight = 0;
  #paused = false;
  #lastSeen = performance.now();
  #lost = false;
  readonly #afterSend = (): void => this.#pump();

  constructor(ws: WebSocket, options: PeerOptions) {
    this.ws = ws;
    this.#o = options;
    // ws refuses an over-large message by closing with 1009 and no reason: say what the limit is.
    const close = ws.close.bind(ws);
    ws.close = (code?: number, reason?: string | Buffer): void => close(code, code === 1009 && !reason ? `message over ${options.maxMessageBytes} bytes: send smaller messages` : reason);
    ws.on('message', (raw: RawData, isBinary: boolean) => {
      this.#lastSeen = performance.now();
      this.#held.push([raw, isBinary]);
      this.#pump();
    });
    ws.on('pong', () => (this.#lastSeen = performance.now()));
  }

  /** The peer stopped answering and was cut off (its episode ends `client_lost`). */
  get lost(): boolean {
    return this.#lost;
  }

  /** Queues a message to the peer (dropped once the socket is closing). */
  send(text: string): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    this.ws.send(text, this.#afterSend);
    this.#pump();
  }

  /**
   * The server's liveness tick: pings a peer quiet for a third of `timeoutMs`, cuts off one from
   * which nothing came for `timeoutMs`. True when this peer was just lost.
   */
  check(now: number, timeoutMs: number): boolean {
    if (this.#lost || this.ws.readyState !== this.ws.OPEN) return false;
    const quiet = now - this.#lastSeen;
    if (quiet > timeoutMs) {
      this.#lost = true;
      this.ws.terminate();
      return true;
    }
    if (quiet > timeoutMs / 3) this.ws.ping();
    return false;
  }

  /** Lets waiting requests through while the queue has room, and reads the socket only while it does. */
  #pump(): void {
    const full = this.ws.bufferedAmount > (this.#paused ? this.#o.lowWater : this.#o.highWater);
    while (!full && this.#held.length > 0 && this.#inFlight < this.#o.maxInFlight) {
      const [raw, isBinary] = this.#held.shift() as [RawData, boolean];
      this.#inFlight++;
      let released = false;
      const release = (): void => {
        if (released) return;
        released = true;
        this.#inFlight--;
        this.#pump();
      };
      void this.#o.onMessage(raw, isBinary, release).finally(release);
    }
    const stop = full || this.#held.length >= MAX_HELD;
    if (stop !== this.#paused && this.ws.readyState === this.ws.OPEN) {
      this.#paused = stop;
      if (stop) this.ws.pause();
      else this.ws.resume();
    }
  }
}
