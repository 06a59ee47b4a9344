/**
 * The command line's entry into the library: everything public, and what only the CLI uses (its
 * reporters, the debug feeds and consoles, process helpers). Not in package.json's `exports`:
 * nothing here is a promise to users, so the public entries stay as narrow as their products.
 */
export * from './index.js';
export * from './schema.js';
export * from './schema-diff.js';
export * from './fuzz.js';
export * from './benchmark.js';
export * from './serve.js';
export * from './replay.js';
export * from './observe.js';
export * from './store-redis.js';
export * from './distributed.js';
export * from './testing.js';

export { attachPlainReporter, summaryLines } from './ui/plain-reporter.js';
export { attachJsonReporter } from './ui/json-reporter.js';
export { fuzzReport } from './ui/fuzz-report.js';
export { decodeUtf8 } from './shared/utf8.js';
export { killProcessGroups } from './tools/process-starts.js';
export { isLoopback } from './server/http-guard.js';
export { RunIndex, type EpisodeRow, type IndexedEvent, type RewardRow, type RunHeader, type TraceRow, type ViolationKind, type ViolationRow } from './replay/run-index.js';
export type { Commit, DebugFeed, EpisodeHistory, FeedStatus } from './replay/debug-feed.js';
export { FolderFeed, type FolderFeedOptions } from './replay/folder-feed.js';
export { AttachFeed, attachUrl } from './replay/attach-feed.js';
export { serveWebConsole, type WebConsoleOptions } from './console/web-console.js';
export { ConsoleServer, consoleUrl, type ConsoleServerOptions } from './console/console-server.js';
export { ConsoleRoutes, CONSOLE_OPEN_ROUTES, type ConsoleRoutesOptions } from './console/console-routes.js';
export { Sandbox, type SandboxCommand } from './sandbox/sandbox.js';
export { parseAllowedHost } from './sandbox/egress.js';
