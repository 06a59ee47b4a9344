/**
 * `npm run build`'s last step: the web console's page script bundled (esbuild, minified) with its
 * stylesheet into dist/web/, where an installed package serves them from (src/console/console-assets.ts).
 */
import { copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { build } from 'esbuild';
import { bundleOptions } from '../src/console/console-assets.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const out = path.join(ROOT, 'dist/web');
await mkdir(out, { recursive: true });
const result = await build({ ...bundleOptions(path.join(ROOT, 'web')), outdir: out, metafile: true });
await copyFile(path.join(ROOT, 'web/console.css'), path.join(out, 'console.css'));
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
console.log(`web console: ${path.relative(ROOT, out)}/console.js (${(bytes / 1024).toFixed(0)} KiB) and console.css`);
