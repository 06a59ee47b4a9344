/**
 * `agentic-rl-toolkit/serve`: an env as a service: `serveEnv` (what `agent serve` runs: OpenEnv's
 * protocol over WebSocket and HTTP, every session a recorded episode) and `serveEnvOverStdio`
 * (what `agent mcp-serve` runs: the env's actions as MCP tools).
 *
 * @module agentic-rl-toolkit/serve
 */
export { serveEnv, type ServeOptions } from './serve/serve.js';
export type { WorkersOptions } from './serve/remote-rollouts.js';
export { serveEnvOverStdio } from './run/mcp-serve.js';
export { RESET_TOOL, STATE_URI, type McpServeOptions } from './run/mcp-serve-options.js';
