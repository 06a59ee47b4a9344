/** The project's own meta-schemas (in `schemas/`), read once and compiled through the shared ajv. */
import { readFileSync } from 'node:fs';
import type { JsonSchema } from './ajv.js';

const cache = new Map<string, JsonSchema>();

export type MetaSchemaName =
  | 'env-manifest'
  | 'action-schema'
  | 'tool-list'
  | 'reward-schema'
  | 'run-event'
  | 'trajectory-record'
  | 'run-summary';

export function metaSchema(name: MetaSchemaName): JsonSchema {
  let schema = cache.get(name);
  if (!schema) {
    schema = JSON.parse(readFileSync(new URL(`../../schemas/${name}.schema.json`, import.meta.url), 'utf8')) as JsonSchema;
    cache.set(name, schema);
  }
  return schema;
}
