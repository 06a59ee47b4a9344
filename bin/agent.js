#!/usr/bin/env node
// Installed: run the built JavaScript. In a checkout (its tsconfig.json is beside bin/), run the
// TypeScript sources through tsx, so that development never runs a stale build.
import { existsSync } from 'node:fs';

if (existsSync(new URL('../tsconfig.json', import.meta.url))) {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./agent.ts');
} else {
  await import('../dist/bin/agent.js');
}
