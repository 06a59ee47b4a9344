/** Mounts the live ink view for a run and unmounts it cleanly when the run ends. */
import { render } from 'ink';
import type { RunSummary } from '../run/run-summary.js';
import { summaryLines } from './plain-reporter.js';
import type { Output, RunSource } from './run-source.js';
import { LiveRunView } from './run-view.js';

/** Renders the live view of `agent run` on a terminal; `close()` prints the summary to `out`. */
export function renderRunView(source: RunSource, stdout: NodeJS.WriteStream, out: Output): { close(summary?: RunSummary): void } {
  // Ctrl-C must reach the run (graceful stop), not unmount the view.
  const instance = render(<LiveRunView source={source} />, { stdout, exitOnCtrlC: false, patchConsole: false });
  return {
    close(summary) {
      instance.unmount();
      if (summary) out.write(summaryLines(summary).join('\n') + '\n');
    },
  };
}
