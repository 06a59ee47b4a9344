/**
 * `agent debug --web` as one library call: open the feed (a run folder, followed while it grows,
 * or a live run's event stream), serve the console over it until the signal aborts, then close
 * both. What the command prints and whether it opens a browser is the caller's.
 */
import { AttachFeed } from '../replay/attach-feed.js';
import type { DebugFeed } from '../replay/debug-feed.js';
import { FolderFeed } from '../replay/folder-feed.js';
import { AgentError } from '../shared/errors.js';
import { ConsoleServer } from './console-server.js';

export interface WebConsoleOptions {
  /** A run folder; or, with `attach`, nothing. */
  readonly runDir?: string;
  /** A live run: its `--port` (host:port) or its run folder (reads server.json). */
  readonly attach?: string;
  /** With `attach` to host:port: the run server's token. */
  readonly attachToken?: string;
  /** Keep reading what a run folder's run appends (default true). */
  readonly follow?: boolean;
  /** The console's port (0, the default: any free one), address (default 127.0.0.1) and token (default: a fresh one). */
  readonly port?: number;
  readonly host?: string;
  readonly token?: string;
  /** Told the page's URL (token in its fragment) once the server listens. */
  readonly onListening?: (info: { readonly url: string; readonly token: string; readonly feed: DebugFeed }) => void;
}

/** Serves the console until `signal` aborts. */
export async function serveWebConsole(options: WebConsoleOptions, signal: AbortSignal): Promise<void> {
  if ((options.attach === undefined) === (options.runDir === undefined)) throw new AgentError('BAD_USAGE', 'the web console shows one run: pass a run folder or attach, not both or neither', { hint: 'agent debug --web runs/<run-id>, or agent debug --web --attach 127.0.0.1:7070' });
  const feed: DebugFeed = options.attach !== undefined ? await AttachFeed.connect(options.attach, { ...(options.attachToken !== undefined ? { token: options.attachToken } : {}), signal }) : await FolderFeed.open(options.runDir as string, { follow: options.follow !== false });
  try {
    await using server = await ConsoleServer.start({ feed, ...(options.runDir !== undefined ? { runDir: options.runDir } : {}), ...(options.port !== undefined ? { port: options.port } : {}), ...(options.host !== undefined ? { host: options.host } : {}), ...(options.token !== undefined ? { token: options.token } : {}) });
    options.onListening?.({ url: server.url, token: server.token, feed });
    if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  } finally {
    await feed[Symbol.asyncDispose]();
  }
}
