import { main } from '../commands/main.js';

// `agent-run …` is `agent run …` (the bin shim passes the subcommand in AGENT_SUBCOMMAND).
const sub = process.env['AGENT_SUBCOMMAND'];
process.exitCode = await main(sub ? [sub, ...process.argv.slice(2)] : process.argv.slice(2));
