/**
 * schema-diff speed: two 1,000-property schemas, 10 levels deep (100 properties per level, one of
 * them nesting the next level), with a handful of changes spread through them. Target: < 1 s.
 */
import { diffSchema, type JsonSchema } from '../src/internal.js';

const json = process.argv.includes('--json');

function level(depth: number, edit: (path: string, leaf: Record<string, unknown>) => Record<string, unknown>, path = ''): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < 99; i++) {
    const kind = i % 4;
    const leaf = kind === 0 ? { type: 'integer', minimum: 0, maximum: 1000 } : kind === 1 ? { type: 'string', maxLength: 64 } : kind === 2 ? { enum: ['a', 'b', 'c'] } : { type: ['number', 'null'] };
    properties[`f${depth}_${i}`] = edit(`${path}/f${depth}_${i}`, leaf);
  }
  if (depth < 9) properties[`level${depth + 1}`] = level(depth + 1, edit, `${path}/level${depth + 1}`);
  return { type: 'object', properties, required: Object.keys(properties).slice(0, 10) };
}

const oldSchema = level(0, (_p, leaf) => leaf) as JsonSchema;
// Tighten a few leaves deep down, loosen a few others.
const changes: Record<string, (leaf: Record<string, unknown>) => Record<string, unknown>> = {
  '/level1/level2/level3/f3_4': (l) => ({ ...l, maximum: 10 }),
  '/level1/level2/level3/level4/level5/level6/level7/f7_5': (l) => ({ ...l, maxLength: 8 }),
  '/level1/level2/level3/level4/level5/level6/level7/level8/level9/f9_2': (l) => ({ ...l, enum: ['a'] }),
  '/level1/f1_3': (l) => ({ ...l, type: ['number'] }),
  '/f0_0': (l) => ({ ...l, maximum: 5000 }),
};
const newSchema = level(0, (p, leaf) => changes[p]?.(leaf) ?? leaf) as JsonSchema;

const count = JSON.stringify(oldSchema).match(/"type"|"enum"/g)?.length ?? 0;
const results: Record<string, { ms: number; breaking: number; findings: number }> = {};
for (const kind of ['action', 'state'] as const) {
  diffSchema(oldSchema, newSchema, kind); // warm-up (compile)
  const t0 = performance.now();
  const findings = diffSchema(oldSchema, newSchema, kind);
  const ms = performance.now() - t0;
  results[kind] = { ms, breaking: findings.filter((f) => f.severity === 'breaking').length, findings: findings.length };
}
const cold = performance.now();
diffSchema(structuredClone(oldSchema), structuredClone(newSchema), 'action', { mode: 'full' });
const coldMs = performance.now() - cold;

if (json) console.log(JSON.stringify({ properties: count, results, fullModeColdMs: coldMs }));
else {
  console.log(`\nschema-diff on two ${count}-property, 10-level schemas (target < 1 s)`);
  for (const [kind, r] of Object.entries(results)) console.log(`  ${kind.padEnd(6)} ${r.ms.toFixed(0).padStart(5)} ms  (${r.breaking} breaking of ${r.findings} findings)`);
  console.log(`  full mode, cold (fresh objects, compile included): ${coldMs.toFixed(0)} ms`);
}
