/**
 * The project's own meta-schemas (in `schemas/`), read once and compiled through the shared ajv;
 * those an env load checks were compiled ahead (meta-validators.generated.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { usePrecompiled, type JsonSchema } from './ajv.js';
import { precompiledName } from './ajv-setup.js';
import * as precompiled from './meta-validators.generated.js';

const cache = new Map<string, JsonSchema>();
// This file is src/schema/ in a checkout and dist/src/schema/ when built; schemas/ sits at the package root.
const DIR = ['../../schemas/', '../../../schemas/'].map((rel) => new URL(rel, import.meta.url)).find((u) => existsSync(u)) ?? new URL('../../schemas/', import.meta.url);

export type MetaSchemaName =
  | 'env-manifest'
  | 'action-schema'
  | 'tool-list'
  | 'reward-schema'
  | 'run-event'
  | 'trajectory-record'
  | 'reward-log-record'
  | 'state-record'
  | 'episode-record'
  | 'conversation-record'
  | 'run-manifest'
  | 'export-record'
  | 'run-summary'
  | 'benchmark-report'
  | 'curriculum';

export function metaSchema(name: MetaSchemaName): JsonSchema {
  let schema = cache.get(name);
  if (!schema) {
    schema = JSON.parse(readFileSync(new URL(`${name}.schema.json`, DIR), 'utf8')) as JsonSchema;
    cache.set(name, schema);
    const validator = (precompiled as unknown as Readonly<Record<string, ValidateFunction | undefined>>)[precompiledName(name)];
    if (validator) usePrecompiled(schema, validator);
  }
  return schema;
}
