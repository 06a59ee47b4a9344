/** Mounts the `agent debug` console and resolves when the user quits. */
import { render } from 'ink';
import type { DebugFeed } from '../replay/debug-feed.js';
import { DebugConsole } from './debug/debug-console.js';

/** Renders the `agent debug` console for a run (a folder or a live run) on a terminal, until the user quits. */
export async function renderDebugConsole(feed: DebugFeed, options: { readonly stdout: NodeJS.WriteStream; readonly stdin?: NodeJS.ReadStream; readonly color: boolean }): Promise<void> {
  const instance = render(<DebugConsole feed={feed} color={options.color} />, { stdout: options.stdout, ...(options.stdin ? { stdin: options.stdin } : {}), exitOnCtrlC: false, patchConsole: false });
  await instance.waitUntilExit();
}
