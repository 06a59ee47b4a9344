/**
 * The web console's page and assets. An installed package serves what `npm run build` bundled into
 * `dist/web/` (esbuild, at build time: nothing is fetched at run time, no CDN, works offline); a
 * checkout, which runs its TypeScript sources, bundles `web/` in memory once per process, so
 * development never serves a stale bundle. The page is one HTML shell, one script, one stylesheet.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { BuildOptions } from 'esbuild';
import { AgentError } from '../shared/errors.js';

export interface ConsoleAssets {
  readonly html: string;
  readonly js: string;
  readonly css: string;
}

/** Where the built assets sit beside this module once compiled (dist/src/console → dist/web), or the sources in a checkout (src/console → web). */
const WEB = new URL('../../web/', import.meta.url);

/** The esbuild options of the bundle: one place for `npm run build` (scripts/build-web.ts) and the checkout. */
export function bundleOptions(webDir: string): BuildOptions {
  return {
    entryPoints: { console: `${webDir}/main.tsx` },
    bundle: true,
    format: 'esm',
    target: 'es2022',
    platform: 'browser',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  };
}

export const CONSOLE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agent debug</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/console.css">
<script type="module" src="/assets/console.js"></script>
</head>
<body><div id="app"></div></body>
</html>
`;

let loading: Promise<ConsoleAssets> | undefined;

export function consoleAssets(): Promise<ConsoleAssets> {
  loading ??= load().catch((err: unknown) => {
    loading = undefined;
    throw err;
  });
  return loading;
}

async function load(): Promise<ConsoleAssets> {
  const built = new URL('console.js', WEB);
  if (existsSync(built)) {
    const [js, css] = await Promise.all([readFile(built, 'utf8'), readFile(new URL('console.css', WEB), 'utf8')]);
    return { html: CONSOLE_HTML, js, css };
  }
  const sources = fileURLToPath(WEB).replace(/\/$/, '');
  if (!existsSync(`${sources}/main.tsx`)) {
    throw new AgentError('INTERNAL', `the web console's assets are missing (looked for ${fileURLToPath(built)})`, { hint: 'Reinstall agentic-rl-toolkit; in a checkout, run npm run build.' });
  }
  const esbuild = await import('esbuild');
  const out = await esbuild.build({ ...bundleOptions(sources), write: false, outdir: '/out' });
  const js = out.outputFiles.find((f) => f.path.endsWith('.js'))?.text ?? '';
  return { html: CONSOLE_HTML, js, css: await readFile(`${sources}/console.css`, 'utf8') };
}
