/** What `agent mcp-serve` takes, and the names it serves under. No MCP SDK type appears here. */
import type { RunOptions } from './run.js';

/** The name of the tool `agent mcp-serve` adds to start a new episode. */
export const RESET_TOOL = 'reset';
/** The MCP resource under which `agent mcp-serve` shows the episode's state. */
export const STATE_URI = 'env://state';

/** What `serveEnvOverStdio` serves: the env and run options, with an MCP client driving each episode instead of a policy. */
export interface McpServeOptions extends Omit<RunOptions, 'policy' | 'concurrency'> {
  /** Called once the run has started: the run folder it records into. */
  readonly onReady?: (dir: string) => void;
}

