import { main } from '../commands/main.js';

// Stack traces of users' TypeScript modules (compiled by tsx) point at their sources.
process.setSourceMapsEnabled(true);

// `agent-run …` is `agent run …`: its shim names the subcommand here. Consumed, so that it does
// not leak into the environment of subprocess tools.
const sub = process.env['AGENT_SUBCOMMAND'];
delete process.env['AGENT_SUBCOMMAND'];
process.exitCode = await main(sub ? [sub, ...process.argv.slice(2)] : process.argv.slice(2));
