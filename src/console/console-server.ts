/**
 * `agent debug --web`: the web console on its own server, over a run folder or a live run it is
 * attached to. The same rules as the run server: loopback by default, Host and Origin checked,
 * and every data route behind a bearer token (generated when none is given; required off
 * loopback). The page gets the token from the URL's fragment (`/#token=…`), which a browser never
 * sends to any server nor puts in a Referer, and keeps it for the tab only.
 */
import { createServer, type Server } from 'node:http';
import type { DebugFeed } from '../replay/debug-feed.js';
import { AgentError, describeError } from '../shared/errors.js';
import { guardRequest, isLoopback, newToken } from '../server/http-guard.js';
import { baseUrl, listen } from '../server/listen.js';
import { CONSOLE_OPEN_ROUTES, ConsoleRoutes } from './console-routes.js';

export interface ConsoleServerOptions {
  readonly feed: DebugFeed;
  /** The run folder shown, for a benchmark run's report. */
  readonly runDir?: string;
  /** 0 (the default) for any free port. */
  readonly port?: number;
  readonly host?: string;
  readonly token?: string;
}

export class ConsoleServer implements AsyncDisposable {
  readonly #server: Server;
  readonly #routes: ConsoleRoutes;
  readonly host: string;
  readonly port: number;
  readonly token: string;

  private constructor(server: Server, routes: ConsoleRoutes, host: string, port: number, token: string) {
    this.#server = server;
    this.#routes = routes;
    this.host = host;
    this.port = port;
    this.token = token;
  }

  /** The page's address, token included (in the fragment): what to open in a browser. */
  get url(): string {
    return consoleUrl(this.host, this.port, this.token);
  }

  static async start(options: ConsoleServerOptions): Promise<ConsoleServer> {
    const host = options.host ?? '127.0.0.1';
    if (!isLoopback(host) && (options.token === undefined || options.token === '')) {
      throw new AgentError('BAD_USAGE', `serving the console on ${host} needs a token: it would show the run to anyone who can reach this machine`, { hint: 'Pass --token <secret> (or set AGENT_TOKEN); or keep the default host 127.0.0.1.' });
    }
    const token = options.token ?? newToken();
    const routes = new ConsoleRoutes({ feed: options.feed, ...(options.runDir !== undefined ? { runDir: () => options.runDir } : {}) });
    const guard = { host, token, open: CONSOLE_OPEN_ROUTES, tokenHint: 'open the URL agent debug --web printed: its #token= part' };
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const refused = guardRequest(req, url.pathname, guard);
      if (refused) return void res.writeHead(refused.status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: refused.error }));
      routes.handle(req, res, url).then(
        (handled) => {
          if (!handled) res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `no route ${url.pathname}: the console is at /` }));
        },
        (err: unknown) => {
          if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: describeError(err) }));
        },
      );
    });
    server.keepAliveTimeout = 1_000;
    return new ConsoleServer(server, routes, host, await listen(server, host, options.port ?? 0), token);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#server.listening) return;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    await this.#routes[Symbol.asyncDispose]();
    this.#server.closeAllConnections();
    await closed;
  }
}

/** A console's address with its token in the fragment. */
export function consoleUrl(host: string, port: number, token: string): string {
  return `${baseUrl(host, port)}/#token=${encodeURIComponent(token)}`;
}
