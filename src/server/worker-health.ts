/**
 * A worker's health endpoint for an orchestrator: `GET /ready` answers 200 while the worker is
 * connected and taking episodes, 503 while it drains or Redis is away (take it out of rotation,
 * do not kill it); `GET /live` answers 200 while the process serves at all; `GET /metrics` the
 * worker's Prometheus metrics, when it has them. Cross-origin browser requests are refused, and a
 * Host other than loopback when bound to loopback.
 */
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { UsageError } from '../shared/errors.js';
import { guardRequest } from './http-guard.js';

/** Where a worker's health endpoint listens, and the metrics it serves. */
export interface WorkerHealthOptions {
  /** Where to listen (default 0.0.0.0: an orchestrator's probes come from elsewhere). */
  readonly host?: string;
  /** Prometheus metrics, on GET /metrics. */
  readonly metrics?: () => Promise<{ readonly contentType: string; readonly body: string }>;
}

/** Serves a worker's `/health` (ready, episodes running) and, given `metrics`, its `/metrics`, for its orchestrator. */
export async function serveWorkerHealth(port: number, status: () => { readonly ready: boolean; readonly running: number }, options: WorkerHealthOptions = {}): Promise<{ readonly port: number; close(): Promise<void> }> {
  const { host = '0.0.0.0', metrics } = options;
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    // Probes carry no token; a browser on a page elsewhere is still kept out (see http-guard).
    const refused = guardRequest(req, path, { host });
    if (refused) {
      res.writeHead(refused.status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: refused.error }));
      return;
    }
    if (path === '/metrics' && metrics) {
      metrics().then(
        (page) => res.writeHead(200, { 'content-type': page.contentType }).end(page.body),
        (err: unknown) => res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(err) })),
      );
      return;
    }
    const s = status();
    const ok = path === '/live' || (path === '/ready' && s.ready);
    const known = path === '/live' || path === '/ready';
    res.writeHead(known ? (ok ? 200 : 503) : 404, { 'content-type': 'application/json' });
    res.end(JSON.stringify(known ? { ready: s.ready, running: s.running } : { error: `GET /ready or /live${metrics ? ' or /metrics' : ''}` }));
  });
  server.listen(port, host);
  try {
    await Promise.race([once(server, 'listening'), once(server, 'error').then(([err]) => Promise.reject(err as Error))]);
  } catch (err) {
    server.close();
    throw new UsageError(`cannot serve the health endpoint on port ${port}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, 'Pass --health-port a free port (0: any).');
  }
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
