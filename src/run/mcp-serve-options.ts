/** What `agent mcp-serve` takes, and the names it serves under. No MCP SDK type appears here. */
import type { RunOptions } from './run.js';

export const RESET_TOOL = 'reset';
export const STATE_URI = 'env://state';

export interface McpServeOptions extends Omit<RunOptions, 'policy' | 'concurrency'> {
  /** Called once the run has started: the run folder it records into. */
  readonly onReady?: (dir: string) => void;
}

