/**
 * The docs site (VitePress): guides, how-tos, the references (the CLI and the records generated
 * from the code and schemas, the TypeScript API by TypeDoc), performance and security. Offline:
 * no CDN, no remote font, local search. `npm run docs:dev` serves it, `npm run docs:build` writes
 * static HTML to docs/.vitepress/dist (ignored by git), `npm run docs:check` builds it and checks
 * every link and anchor.
 */
import { cpSync, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { defineConfig, type DefaultTheme } from 'vitepress';

const DOCS = path.join(import.meta.dirname, '..');
const API = path.join(DOCS, 'reference', 'api');

// The record schemas the reference links to are served as they ship (docs/public/schemas, ignored by git).
cpSync(path.join(DOCS, '..', 'schemas'), path.join(DOCS, 'public', 'schemas'), { recursive: true });

/** The TypeDoc pages, one per entry point, as its index lists them (`npm run docs:api` writes them before a build). */
function apiPages(): DefaultTheme.SidebarItem[] {
  const index = path.join(API, 'index.md');
  if (!existsSync(index)) return [];
  return [...readFileSync(index, 'utf8').matchAll(/^- \[([^\]]+)\]\(([^)]+)\/index\.md\)$/gm)].map(([, name, dir]) => ({ text: name as string, link: `/reference/api/${dir as string}/` }));
}

export default defineConfig({
  title: 'agentic-rl-toolkit',
  description: 'The runtime for agentic RL: schema-first environments, an async env core, delayed rewards on the right step, runs that survive kill -9, and the agent CLI.',
  cleanUrls: true,
  // Example addresses (a collector on localhost:4318) are not links to check.
  ignoreDeadLinks: 'localhostLinks',
  lastUpdated: false,
  // Generated and internal notes are not pages of their own.
  srcExclude: ['**/README.md'],
  // The pages are Markdown, never HTML: `<run-id>` in a sentence is text (and Vue never sees a tag).
  markdown: {
    html: false,
    // Inline code is shown as written: `{{state}}` in a judge's prompt is not a Vue interpolation.
    config: (md) => {
      const inline = md.renderer.rules.code_inline;
      md.renderer.rules.code_inline = (tokens, idx, options, env, self) => (inline ? inline(tokens, idx, options, env, self) : self.renderToken(tokens, idx, options)).replace(/^<code/, '<code v-pre');
    },
  },
  themeConfig: {
    search: { provider: 'local' },
    nav: [
      { text: 'Guide', link: '/guide/getting-started' },
      { text: 'How-to', link: '/how-to/train' },
      { text: 'Reference', link: '/reference/cli' },
      { text: 'Performance', link: '/performance' },
      { text: 'Security', link: '/security' },
    ],
    sidebar: [
      {
        text: 'Guide',
        items: [
          { text: 'Getting started', link: '/guide/getting-started' },
          { text: 'Env folders and enabled_if', link: '/guide/env-folders' },
          { text: 'Writing tools', link: '/guide/tools' },
          { text: 'The async core', link: '/guide/async-core' },
          { text: 'Runs and the run folder', link: '/guide/runs' },
          { text: 'Rewards and delays', link: '/guide/rewards' },
          { text: 'State and time travel', link: '/guide/state' },
          { text: 'Lifecycles and crash recovery', link: '/guide/recovery' },
        ],
      },
      {
        text: 'How-to',
        items: [
          { text: 'Train (torch, TRL, verl)', link: '/how-to/train' },
          { text: 'Export for trainers', link: '/how-to/export' },
          { text: 'Training data from rollouts', link: '/how-to/token-rollouts' },
          { text: 'Train your own agent program', link: '/how-to/agent-programs' },
          { text: 'Train through the runtime', link: '/how-to/train-loop' },
          { text: 'Run model-written code in a sandbox', link: '/how-to/sandbox' },
          { text: 'Serve an env to Python', link: '/how-to/serve-python' },
          { text: 'Distributed runs', link: '/how-to/distributed' },
          { text: 'Observability', link: '/how-to/observability' },
          { text: 'Debugging', link: '/how-to/debugging' },
          { text: 'Schema-diff in CI', link: '/how-to/schema-diff' },
          { text: 'Fuzzing', link: '/how-to/fuzzing' },
          { text: 'Benchmarks (τ-bench)', link: '/how-to/benchmark' },
          { text: 'An env as an MCP server', link: '/how-to/mcp-server' },
        ],
      },
      {
        text: 'Reference',
        items: [
          { text: 'The agent command', link: '/reference/cli' },
          { text: 'Records', link: '/reference/records' },
          { text: 'Errors', link: '/reference/errors' },
          { text: 'Serve protocol', link: '/reference/protocol' },
          { text: 'Architecture', link: '/architecture' },
          { text: 'TypeScript API', link: '/reference/api/', collapsed: true, items: apiPages() },
        ],
      },
      { text: 'Performance', link: '/performance' },
      { text: 'Security', link: '/security' },
    ],
  },
});
