/**
 * What a live run attaches beside its episodes, each loaded or written only when the run asks for
 * it: `<run>/server.json` for local clients of its server, the web console's routes over its
 * folder, and the OpenTelemetry exporters of a traced run.
 */
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ConsoleRoutes } from '../console/console-routes.js';
import type { RunConfig } from '../events/run-events.js';
import type { OtelConfig } from '../observe/otel-config.js';
import type { RunMetrics } from '../observe/prometheus.js';
import type { RunTelemetry } from '../observe/telemetry.js';
import type { RunTraceIds } from '../observe/trace-context.js';
import type { RunServer } from '../server/run-server.js';
import { AgentError } from '../shared/errors.js';

/**
 * `<run>/server.json`: the live server's URL and token for local clients (`agent debug --attach
 * <run-dir>`, scripts), readable by the owner only; removed when the server stops.
 */
export async function writeServerFile(dir: string, server: RunServer): Promise<AsyncDisposable> {
  const file = path.join(dir, 'server.json');
  // Created afresh: a file left by a killed process keeps its mode, and this one holds a secret.
  await rm(file, { force: true });
  await writeFile(file, `${JSON.stringify({ url: server.url, token: server.token, pid: process.pid }, null, 2)}\n`, { mode: 0o600 });
  return { [Symbol.asyncDispose]: () => rm(file, { force: true }) };
}

/** The web console's routes load here, and only for a served run. */
export async function webConsole(dir: () => string | undefined): Promise<ConsoleRoutes> {
  const [{ ConsoleRoutes }, { FolderFeed }] = await Promise.all([import('../console/console-routes.js'), import('../replay/folder-feed.js')]);
  return new ConsoleRoutes({
    feed: () => {
      const at = dir();
      return at === undefined ? Promise.reject(new AgentError('BAD_USAGE', 'the run is starting: its folder is not there yet')) : FolderFeed.open(at, { pollMs: 50 });
    },
    runDir: dir,
  });
}

/** The OpenTelemetry SDK and exporters load here, and only for a traced run. */
export async function startTelemetry(otel: { readonly config: OtelConfig; readonly ids: RunTraceIds }, config: RunConfig, metrics: RunMetrics | undefined): Promise<RunTelemetry> {
  const { RunTelemetry } = await import('../observe/telemetry.js');
  return RunTelemetry.start(otel.config, otel.ids, { env: config.env, policy: config.policy }, metrics);
}
