import { main } from '../commands/main.js';

// Stack traces of users' TypeScript modules (compiled by tsx) point at their sources.
process.setSourceMapsEnabled(true);

// `agent-run …` is `agent run …`: its shim names the subcommand here. Consumed, so that it does
// not leak into the environment of subprocess tools.
// `agent … | head`: once the reader is gone there is no one left to tell; end quietly instead of
// dying on an unhandled EPIPE. A command that handles it itself (`run` stops gracefully and
// flushes its folder) has its own listener, and this one leaves it to it.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE' && stream.listenerCount('error') === 1) process.exit(process.exitCode ?? 0);
  });
}
// NO_COLOR (https://no-color.org), any non-empty value: no colour from any command. chalk (under
// ink's views too) reads FORCE_COLOR once, when it loads, which is after this line.
if (process.env['NO_COLOR']) process.env['FORCE_COLOR'] = '0';
const sub = process.env['AGENT_SUBCOMMAND'];
delete process.env['AGENT_SUBCOMMAND'];
process.exitCode = await main(sub ? [sub, ...process.argv.slice(2)] : process.argv.slice(2));
// The command is done, and has awaited everything it owns. Something still holding the event loop
// now is a tool that ignored its AbortSignal (the run has named it): it must not keep the CLI
// alive, not even for a grace period (Ctrl-C promises an exit within 2 s). What was written to
// stdout and stderr is flushed first.
await Promise.all([process.stdout, process.stderr].map((s) => new Promise((resolve) => (s.writableLength === 0 || s.destroyed ? resolve(undefined) : s.write('', resolve)))));
process.exit();
