/**
 * A worker thread running one of our modules: the built `.js` imported as it is, a checkout's `.ts`
 * source through tsx's `tsImport` (Node 20's workers inherit no loader hooks from the thread that
 * starts them, so a TypeScript entry needs its own).
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

// tsx's CommonJS build of tsImport resolves its ESM half at a wrong path, so the worker imports
// the ESM build (same folder, .mjs) by URL.
const TSX_API = pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api').replace(/\.cjs$/, '.mjs')).href;
// The worker boots from a tiny snippet: its entry and the data it was given ride in workerData.
const BOOT = `const { workerData } = require('node:worker_threads');
const { entry, tsxApi } = workerData.boot;
(tsxApi ? import(tsxApi).then((api) => api.tsImport(entry, entry)) : import(entry)).catch((e) => { setImmediate(() => { throw e; }); });`;

/** The module beside `from` (an `import.meta.url`) named `name`, with `from`'s extension: `.ts` in a checkout, `.js` when built. */
export function siblingModule(from: string, name: string): string {
  return new URL(`./${name}${path.extname(fileURLToPath(from))}`, from).href;
}

/** Starts a worker thread on `entry` (a module URL); it reads `data` as `workerData.data`. */
export function startModuleWorker(entry: string, data: unknown): Worker {
  const tsxApi = entry.endsWith('.ts') ? TSX_API : undefined;
  return new Worker(BOOT, { eval: true, workerData: { boot: { entry, tsxApi }, data } });
}
