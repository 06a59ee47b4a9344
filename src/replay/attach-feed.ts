/**
 * A live run as a debug feed: the server-sent events of `agent run … --port <port>` (GET /events),
 * read with fetch and indexed as they come. A dropped connection is retried every second with
 * Last-Event-ID, so nothing in the server's replay buffer is missed; initial states come from
 * GET /states/<id>. A late attach sees the server's replay buffer (the last 10,000 events) and
 * everything after it; the run folder holds the whole run.
 */
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { AgentError, describeError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import { commitsOf, historyOf, type DebugFeed, type EpisodeHistory, type FeedStatus } from './debug-feed.js';
import { RunIndex, type IndexedEvent } from './run-index.js';

const RETRY_MS = 1_000;
/** How long the first connection may take before attaching fails. */
const CONNECT_TIMEOUT_MS = 5_000;

/** `7070`, `127.0.0.1:7070` or `http://127.0.0.1:7070` → the server's base URL. */
export function attachUrl(address: string): URL {
  const withHost = /^\d+$/.test(address) ? `127.0.0.1:${address}` : address;
  let url: URL;
  try {
    url = new URL(/^https?:\/\//.test(withHost) ? withHost : `http://${withHost}`);
  } catch {
    throw new AgentError('BAD_USAGE', `'${address}' is not an address`, { hint: 'Pass host:port (e.g. 127.0.0.1:7070), the --port of a running `agent run`.' });
  }
  if (!url.port) throw new AgentError('BAD_USAGE', `'${address}' names no port`, { hint: 'Pass host:port (e.g. 127.0.0.1:7070), the --port of a running `agent run`.' });
  return url;
}

/**
 * Where to attach and with which token: a run folder's `server.json` (written while its server is
 * live), else `host:port` with the token given (`--token`, `AGENT_TOKEN`).
 */
export async function attachTarget(address: string, token: string | undefined): Promise<{ readonly url: URL; readonly token: string | undefined }> {
  const isDir = await stat(address).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDir) return { url: attachUrl(address), token };
  const file = path.join(address, 'server.json');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new AgentError('BAD_USAGE', `${file} does not exist: this run is not serving (it ended, or ran without --port)`, { hint: `Open the folder instead: agent debug ${address}` });
  }
  const saved = JSON.parse(text) as { url?: unknown; token?: unknown };
  if (typeof saved.url !== 'string' || typeof saved.token !== 'string') throw new AgentError('BAD_USAGE', `${file} has no url and token`, { hint: 'Attach with host:port and --token instead.' });
  return { url: attachUrl(saved.url), token: token ?? saved.token };
}

export class AttachFeed implements DebugFeed {
  readonly title: string;
  readonly index = new RunIndex<IndexedEvent>();
  readonly #base: URL;
  readonly #headers: Readonly<Record<string, string>>;
  readonly #abort = new AbortController();
  readonly #listeners = new Set<() => void>();
  #status: FeedStatus = { phase: 'reconnecting' };
  #lastId = 0;
  #loop: Promise<void> | undefined;
  #retry: NodeJS.Timeout | undefined;

  private constructor(base: URL, token: string | undefined) {
    this.#base = base;
    this.#headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
    this.title = base.host;
  }

  /**
   * Connects (failing within seconds if nothing answers) and keeps reading until disposed.
   * `address`: host:port (with `token`, the server's), or the run folder of a live run.
   */
  static async connect(address: string, options: { readonly token?: string; readonly signal?: AbortSignal } = {}): Promise<AttachFeed> {
    const { signal } = options;
    const target = await attachTarget(address, options.token);
    const feed = new AttachFeed(target.url, target.token);
    const timeout = AbortSignal.timeout(CONNECT_TIMEOUT_MS);
    const first = await feed.#open(signal ? AbortSignal.any([signal, timeout]) : timeout).catch((err: unknown) => {
      const why = timeout.aborted ? `no answer in ${CONNECT_TIMEOUT_MS / 1000} s` : describeError((err as { cause?: unknown }).cause ?? err);
      throw new AgentError('BAD_USAGE', `cannot attach to ${feed.title}: ${why}`, { hint: `Is \`agent run … --port ${feed.#base.port}\` running on this machine? Or open its run folder: agent debug runs/<run-id>.` });
    });
    feed.#status = { phase: 'live' };
    feed.#loop = feed.#read(first);
    return feed;
  }

  async #open(signal: AbortSignal): Promise<ReadableStream<Uint8Array>> {
    const res = await fetch(new URL('/events', this.#base), { headers: { ...this.#headers, accept: 'text/event-stream', ...(this.#lastId > 0 ? { 'last-event-id': String(this.#lastId) } : {}) }, signal: AbortSignal.any([signal, this.#abort.signal]) });
    if (res.status === 401) throw new AgentError('BAD_USAGE', `GET /events answered 401: ${this.#headers['authorization'] ? 'wrong token' : 'the run server needs its token'}`, { hint: 'Attach with the run folder (agent debug --attach runs/<run-id>), or pass --token (or AGENT_TOKEN) the token agent run printed.' });
    if (!res.ok || !res.body) throw new AgentError('BAD_USAGE', `GET /events answered ${res.status}`, { hint: 'Attach to the --port of `agent run`.' });
    return res.body;
  }

  /** Reads frames until the stream ends, then reconnects after a pause (until disposed). */
  async #read(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffered = '';
    try {
      for await (const chunk of body) {
        buffered += decoder.decode(chunk, { stream: true });
        let end = buffered.indexOf('\n\n');
        if (end === -1) continue;
        while (end !== -1) {
          this.#frame(buffered.slice(0, end));
          buffered = buffered.slice(end + 2);
          end = buffered.indexOf('\n\n');
        }
        for (const l of this.#listeners) l();
      }
    } catch {
      // A reset connection is retried like an ended one.
    }
    if (this.#abort.signal.aborted) return;
    this.#setStatus({ phase: 'reconnecting' });
    this.#retry = setTimeout(() => {
      this.#loop = this.#open(this.#abort.signal).then(
        (next) => {
          this.#setStatus({ phase: 'live' });
          return this.#read(next);
        },
        (err: unknown) => {
          if (this.#abort.signal.aborted) return;
          this.#setStatus({ phase: 'reconnecting', error: describeError((err as { cause?: unknown }).cause ?? err) });
          return this.#read(new ReadableStream({ start: (c) => c.close() }));
        },
      );
    }, RETRY_MS);
  }

  #frame(frame: string): void {
    let id: number | undefined;
    let data = '';
    for (const line of frame.split('\n')) {
      if (line.startsWith('id: ')) id = Number(line.slice(4));
      else if (line.startsWith('data: ')) data += line.slice(6);
    }
    if (data === '') return;
    if (id !== undefined) this.#lastId = id;
    let event: IndexedEvent;
    try {
      event = JSON.parse(data) as IndexedEvent;
    } catch {
      return;
    }
    this.index.ingest(event, event);
  }

  #setStatus(status: FeedStatus): void {
    this.#status = status;
    for (const l of this.#listeners) l();
  }

  status(): FeedStatus {
    return this.#status;
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  episodeEvents(episode: number): Promise<readonly IndexedEvent[]> {
    const row = this.index.episodes.get(episode);
    if (!row) return Promise.reject(new AgentError('BAD_USAGE', `episode ${episode} has not been seen on ${this.title}`));
    return Promise.resolve(row.refs);
  }

  async episodeHistory(episode: number, signal?: AbortSignal): Promise<EpisodeHistory> {
    const events = await this.episodeEvents(episode);
    const row = this.index.episodes.get(episode);
    if (!row) throw new AgentError('BAD_USAGE', `episode ${episode} has not been seen on ${this.title}`);
    const res = await fetch(new URL(`/states/${encodeURIComponent(row.initialStateId)}`, this.#base), { headers: this.#headers, signal: AbortSignal.any([...(signal ? [signal] : []), this.#abort.signal]) });
    if (!res.ok) throw new AgentError('BAD_USAGE', `the run does not serve initial state ${row.initialStateId} (${res.status})`, { hint: 'Open the run folder instead: agent debug runs/<run-id>.' });
    return historyOf(episode, row.instanceId, (await res.json()) as JsonValue, commitsOf(events));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#abort.abort();
    clearTimeout(this.#retry);
    this.#listeners.clear();
    await this.#loop;
  }
}
