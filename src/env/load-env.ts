/**
 * Loading an env definition, as the public API offers it: the schema room's loader given the
 * MCP client's tool lister, so that `actions_from` imports work wherever a definition is loaded.
 */
import { defineEnv as defineWith, loadEnvDefinition as loadWith, type EnvManifest, type LoadEnvOptions } from '../schema/load-env.js';
import type { EnvDefinition } from '../schema/definition.js';
import { listMcpTools } from '../tools/mcp/list-tools.js';

/** Load and validate the env folder at `dir` (its manifest or its three schema files and tools). */
export function loadEnvDefinition(dir: string, options: LoadEnvOptions = {}): Promise<EnvDefinition> {
  return loadWith(dir, { listMcpTools, ...options });
}

/** An env defined in code: the manifest's shape, with paths relative to `options.dir`. */
export function defineEnv(manifest: EnvManifest, options: LoadEnvOptions & { dir?: string } = {}): Promise<EnvDefinition> {
  return defineWith(manifest, { listMcpTools, ...options });
}
