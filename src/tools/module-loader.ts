/** Loads a tools module (TypeScript or JavaScript) once per file and extracts its handlers. */
import { statSync } from 'node:fs';
import path from 'node:path';
import { AgentError, describeError } from '../shared/errors.js';
import { importModule, ModuleImportError } from '../shared/import-module.js';
import { isPlainObject } from '../shared/json.js';
import type { ToolHandler, ToolModuleConfig } from './types.js';

const cache = new Map<string, Promise<Record<string, unknown>>>();

export function importToolModule(file: string): Promise<Record<string, unknown>> {
  // Keyed by modification time too, so a long-lived process picks up an edited module.
  const key = `${file}@${statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0}`;
  let loaded = cache.get(key);
  if (!loaded) {
    loaded = importModule(file).catch((err: unknown) => {
      cache.delete(key);
      throw new AgentError('DEFINITION_INVALID', `cannot load tools module ${err instanceof ModuleImportError ? err.message : `'${file}': ${describeError(err)}`}`, {
        cause: err,
        hint: 'Fix the module at the line and column named, so that it imports cleanly.',
      });
    });
    cache.set(key, loaded);
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
