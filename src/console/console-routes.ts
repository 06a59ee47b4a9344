/**
 * The web console's routes, mounted on any of our servers (the standalone `agent debug --web`
 * server, and the run server of `agent run --port`): the page and its assets, open like /health
 * since they hold no data; the JSON API under `/api/`, behind the server's token; and
 * `/api/updates`, JSON lines telling the page the index moved, at most twenty a second however
 * fast the run goes, so a page follows a 1,000-steps/s run by refetching only what it shows.
 * The server in front does the Host/Origin/token checks (http-guard.ts); these routes only answer.
 */
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import type { DebugFeed } from '../replay/debug-feed.js';
import { describeError, isAgentError } from '../shared/errors.js';
import { CURRICULUM_FILE, parseCurriculum } from '../replay/curriculum-file.js';
import { benchmarkDigest, curriculumDigest, EpisodeQuery, feedState, history, OverviewQuery, rewardFlow, TraceQuery, timeline, violations, type TraceFilter } from './console-api.js';
import { consoleAssets } from './console-assets.js';

/** The page and its assets: no token (a browser cannot send one for them), no data in them. */
export const CONSOLE_OPEN_ROUTES: ReadonlySet<string> = new Set(['/', '/index.html', '/assets/console.js', '/assets/console.css']);

/**
 * The page may load only what this server serves and talk only to it: a page that reads a run's
 * state must not be able to send it anywhere else, even if a state holds markup.
 */
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const UPDATE_MS = 50;
const INDEXING_UPDATE_MS = 250;
const HEARTBEAT_MS = 15_000;

export interface ConsoleRoutesOptions {
  /** The feed to show; a function opens it on first use (a live run's folder exists only once the run has started) and the routes then own it. */
  readonly feed: DebugFeed | (() => Promise<DebugFeed>);
  /** The run folder, for its report files (a benchmark's benchmark.json, a served run's curriculum.json). */
  readonly runDir?: () => string | undefined;
  readonly clock?: () => number;
  /** The least time between two lines of /api/updates (default 50 ms: twenty a second). */
  readonly updateMs?: number;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function intParam(url: URL, name: string, fallback: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new HttpError(400, `?${name}= takes a whole number ≥ 0 (got '${raw}')`);
  return n;
}

export class ConsoleRoutes implements AsyncDisposable {
  /** The routes a server lets through without its token. */
  readonly open = CONSOLE_OPEN_ROUTES;
  readonly #options: ConsoleRoutesOptions;
  readonly #traces = new TraceQuery();
  readonly #overview = new OverviewQuery();
  readonly #episodes = new EpisodeQuery();
  readonly #streams = new Set<ServerResponse>();
  readonly #clock: () => number;
  #feed: Promise<DebugFeed> | undefined;
  /** The run folder's report files as last read, by name, with their modification time. */
  readonly #files = new Map<string, { readonly mtime: number; readonly digest: unknown }>();
  #closed = false;

  constructor(options: ConsoleRoutesOptions) {
    this.#options = options;
    this.#clock = options.clock ?? Date.now;
    // Read (or, in a checkout, bundled) now, while the browser is still on its way: the page is served at once.
    consoleAssets().catch(() => undefined);
  }

  #openFeed(): Promise<DebugFeed> {
    const { feed } = this.#options;
    if (typeof feed !== 'function') return Promise.resolve(feed);
    this.#feed ??= feed().catch((err: unknown) => {
      this.#feed = undefined;
      throw new HttpError(503, `the run's folder cannot be read yet: ${describeError(err)}`);
    });
    return this.#feed;
  }

  /** Answers the request when it is one of the console's; false when it is not (the server routes it on). */
  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> {
    const p = url.pathname;
    if (!CONSOLE_OPEN_ROUTES.has(p) && !p.startsWith('/api/')) return false;
    if (req.method !== 'GET') {
      sendJson(res, 405, { error: `${p} answers GET only` });
      return true;
    }
    try {
      if (CONSOLE_OPEN_ROUTES.has(p)) await this.#asset(res, p);
      else await this.#api(req, res, url);
    } catch (err) {
      const status = err instanceof HttpError ? err.status : isAgentError(err) && err.code === 'UNKNOWN_EPISODE' ? 404 : isAgentError(err) && err.code === 'BAD_USAGE' ? 400 : 500;
      sendJson(res, status, { error: err instanceof Error ? err.message : describeError(err) });
    }
    return true;
  }

  async #asset(res: ServerResponse, p: string): Promise<void> {
    const assets = await consoleAssets();
    const [type, body] = p.endsWith('.js') ? ['text/javascript', assets.js] : p.endsWith('.css') ? ['text/css', assets.css] : ['text/html', assets.html];
    res.writeHead(200, { 'content-type': `${type}; charset=utf-8`, 'content-security-policy': CSP, 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', 'cache-control': 'no-cache' }).end(body);
  }

  async #api(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const feed = await this.#openFeed();
    const route = url.pathname.slice('/api/'.length);
    if (route === 'updates') return this.#updates(req, res, feed);
    if (route === 'overview') return sendJson(res, 200, this.#overview.answer(feed, { benchmark: await this.#fileDigest('benchmark.json', (text) => benchmarkDigest(JSON.parse(text) as unknown)), curriculum: await this.#fileDigest(CURRICULUM_FILE, (text, file) => curriculumDigest(parseCurriculum(text, file))) }, this.#clock));
    if (route === 'traces') {
      const episode = url.searchParams.get('episode');
      const filter: TraceFilter = {
        q: url.searchParams.get('q') ?? '',
        status: url.searchParams.get('status') ?? '',
        tool: url.searchParams.get('tool') ?? '',
        ...(episode !== null && episode !== '' ? { episode: intParam(url, 'episode', 0) } : {}),
        order: url.searchParams.get('order') === 'desc' ? 'desc' : 'asc',
      };
      return sendJson(res, 200, this.#traces.page(feed, filter, intParam(url, 'offset', 0), intParam(url, 'limit', 100)));
    }
    if (route === 'episodes') return sendJson(res, 200, this.#episodes.page(feed, intParam(url, 'offset', 0), intParam(url, 'limit', 100)));
    if (route === 'rewards') return sendJson(res, 200, rewardFlow(feed, this.#clock));
    if (route === 'violations') return sendJson(res, 200, violations(feed, intParam(url, 'offset', 0), intParam(url, 'limit', 100), url.searchParams.get('q') ?? ''));
    const m = /^episodes\/(\d+)\/(timeline|history)$/.exec(route);
    if (m) {
      const abort = new AbortController();
      const onClose = (): void => abort.abort();
      req.once('close', onClose);
      try {
        const n = Number(m[1]);
        return sendJson(res, 200, m[2] === 'timeline' ? await timeline(feed, n, abort.signal) : await history(feed, n, abort.signal));
      } finally {
        req.off('close', onClose);
      }
    }
    throw new HttpError(404, `no route /api/${route}: /api/overview, /api/traces, /api/episodes, /api/episodes/<n>/timeline, /api/episodes/<n>/history, /api/rewards, /api/violations or /api/updates`);
  }

  /** A report file of the run folder in brief, re-read only when it changes (a benchmark writes benchmark.json at its end, a served run curriculum.json after each rollouts group). */
  async #fileDigest<T>(name: string, digest: (text: string, file: string) => T | undefined): Promise<T | undefined> {
    const dir = this.#options.runDir?.();
    if (dir === undefined) return undefined;
    const file = path.join(dir, name);
    if (!existsSync(file)) return undefined;
    try {
      const mtime = (await stat(file)).mtimeMs;
      if (this.#files.get(name)?.mtime !== mtime) this.#files.set(name, { mtime, digest: digest(await readFile(file, 'utf8'), file) });
    } catch {
      // Being written right now: the next request reads it.
    }
    return this.#files.get(name)?.digest as T | undefined;
  }

  /** JSON lines of the feed's state: one at once, then one whenever the index moved, at most every `updateMs`. */
  #updates(req: IncomingMessage, res: ServerResponse, feed: DebugFeed): void {
    if (this.#closed) return sendJson(res, 503, { error: 'the console is closing' });
    res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
    const every = this.#options.updateMs ?? UPDATE_MS;
    let sent = '';
    let last = 0;
    let timer: NodeJS.Timeout | undefined;
    const send = (): void => {
      timer = undefined;
      const line = JSON.stringify(feedState(feed));
      if (line === sent) return;
      sent = line;
      last = performance.now();
      res.write(`${line}\n`);
    };
    const schedule = (): void => {
      if (timer !== undefined) return;
      // While a folder is first indexed, every chunk changes the index: fewer updates leave the CPU to the indexing.
      const gap = feed.status().phase === 'indexing' ? Math.max(every, INDEXING_UPDATE_MS) : every;
      timer = setTimeout(send, Math.max(0, last + gap - performance.now()));
    };
    const off = feed.onChange(schedule);
    const heartbeat = setInterval(() => res.write('\n'), HEARTBEAT_MS);
    heartbeat.unref();
    this.#streams.add(res);
    const close = (): void => {
      off();
      clearTimeout(timer);
      clearInterval(heartbeat);
      this.#streams.delete(res);
    };
    req.once('close', close);
    res.once('close', close);
    send();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#closed = true;
    for (const res of this.#streams) res.end();
    this.#streams.clear();
    if (typeof this.#options.feed === 'function' && this.#feed) {
      const feed = await this.#feed.catch(() => undefined);
      await feed?.[Symbol.asyncDispose]();
    }
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' }).end(JSON.stringify(body));
}
