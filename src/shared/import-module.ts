import path from 'node:path';
import { pathToFileURL } from 'node:url';

const TS = new Set(['.ts', '.mts', '.cts', '.tsx']);

/**
 * Import a user module by path. TypeScript goes through tsx's `tsImport`, which compiles on the
 * fly without registering a global loader, so this works the same under the CLI, vitest or a
 * user's own Node process.
 */
export async function importModule(file: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(path.resolve(file)).href;
  if (!TS.has(path.extname(file))) return (await import(url)) as Record<string, unknown>;
  const api = await import('tsx/esm/api');
  return (await api.tsImport(url, import.meta.url)) as Record<string, unknown>;
}
