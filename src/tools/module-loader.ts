/**
 * Loads a tools module (TypeScript or JavaScript) and extracts its handlers. TypeScript goes
 * through tsx's `tsImport`, which compiles on the fly without registering a global loader, so
 * the library works the same under the CLI, vitest, or a user's own Node process.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { AgentError } from '../shared/errors.js';
import { isPlainObject } from '../shared/json.js';
import type { ToolHandler, ToolModuleConfig } from './types.js';

const TS = new Set(['.ts', '.mts', '.cts', '.tsx']);
const cache = new Map<string, Promise<Record<string, unknown>>>();

export function importToolModule(file: string): Promise<Record<string, unknown>> {
  let loaded = cache.get(file);
  if (!loaded) {
    const url = pathToFileURL(file).href;
    loaded = (TS.has(path.extname(file)) ? import('tsx/esm/api').then((api) => api.tsImport(url, import.meta.url)) : import(url)).catch((err: unknown) => {
      cache.delete(file);
      throw new AgentError('DEFINITION_INVALID', `cannot load tools module '${file}': ${(err as Error).message}`, {
        cause: err,
        hint: 'Fix the module so that it imports cleanly (try `npx tsx <file>`).',
      });
    }) as Promise<Record<string, unknown>>;
    cache.set(file, loaded);
  }
  return loaded;
}

/** The handlers of a loaded module: `createTools(config)`'s result, or the named exports. */
export async function handlersOf(namespace: Record<string, unknown>, config: ToolModuleConfig): Promise<Record<string, unknown>> {
  const factory = namespace['createTools'];
  if (typeof factory === 'function') {
    const made = (await (factory as (c: ToolModuleConfig) => unknown)(config)) as unknown;
    if (!isPlainObject(made)) throw new AgentError('DEFINITION_INVALID', 'createTools() must return an object of handlers keyed by action name');
    return made;
  }
  const def = namespace['default'];
  return isPlainObject(def) ? { ...def, ...namespace } : namespace;
}

export function handlerNamed(handlers: Record<string, unknown>, exportName: string, file: string): ToolHandler {
  const h = handlers[exportName];
  if (typeof h !== 'function') {
    throw new AgentError('TOOL_NOT_FOUND', `tools module '${path.basename(file)}' has no handler '${exportName}'`, {
      hint: `Export a function named '${exportName}' (or return it from createTools), or bind the action to a command or URL in env.json.`,
    });
  }
  return h as ToolHandler;
}
