#!/usr/bin/env node
// `agent-run …` is `agent run …`.
process.env.AGENT_SUBCOMMAND = 'run';
await import('./agent.js');
