/**
 * How the toolkit's ajv is made, apart from everything that uses it: scripts/build-validators.ts
 * generates the validators compiled ahead (meta-validators.generated.ts) with this very setup, and
 * must not load what it generates.
 */
import { createRequire } from 'node:module';
import Ajv2020Module, { type CodeOptions } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv and ajv-formats are CommonJS; under `module: nodenext` their default export is the module object.
const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
const require = createRequire(import.meta.url);
const draft07MetaSchema = require('ajv/dist/refs/json-schema-draft-07.json') as Record<string, unknown>;

/** The JSON Schema dialects' meta-schemas, by the name their validators compiled ahead are exported under. */
export const DIALECT_META_SCHEMAS = { draft2020: 'https://json-schema.org/draft/2020-12/schema', draft07: 'http://json-schema.org/draft-07/schema' } as const;

/**
 * An ajv set up as the toolkit's (`code`: for scripts/build-validators.ts, which generates code with it).
 * verbose: errors carry their schema, so that an unknown key can be answered with "did you mean".
 * multipleOfPrecision: 0.3 is a multiple of 0.1, as the spec means it (and prices in cents need).
 */
export function createAjv(code?: CodeOptions): InstanceType<typeof Ajv2020> {
  const ajv = new Ajv2020({ strict: false, allErrors: true, allowUnionTypes: true, validateSchema: false, verbose: true, multipleOfPrecision: 9, ...(code ? { code } : {}) });
  ajv.addMetaSchema(draft07MetaSchema);
  addFormats(ajv);
  return ajv;
}

/** The name a project meta-schema's validator is exported under in meta-validators.generated.ts (`env-manifest`: `envManifest`). */
export function precompiledName(name: string): string {
  return name.replace(/-(.)/g, (_, c: string) => c.toUpperCase());
}
