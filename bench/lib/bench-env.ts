/** The env the core benchmarks step (bench/core.bench.ts, bench/lib/cold-probe.ts): a small state with validation, `enabled_if` on every action, a reward. */
import type * as Lib from '../../src/index.js';
import type { AgentEnv, ToolHandler } from '../../src/index.js';

/** The library's public API as the benchmark loads it: the sources, or (BENCH_BUILT=1) the built package as users get it. */
type Api = Pick<typeof Lib, 'AgentEnv' | 'defineEnv'>;
const { AgentEnv: Env, defineEnv } = (process.env['BENCH_BUILT'] === '1' ? await import('../../dist/src/index.js' as string) : await import('../../src/index.js')) as Api;

export async function makeEnv(handlers: Record<string, ToolHandler>, options: { readonly snapshotEvery?: number; readonly retainDeltas?: number } = {}): Promise<AgentEnv> {
  const def = await defineEnv({
    name: 'bench',
    state: {
      type: 'object',
      properties: { counter: { type: 'integer', minimum: 0 }, last: { type: ['string', 'null'] }, user: { type: 'object', properties: { id: { type: 'string' } } } },
      required: ['counter'],
    },
    actions: Object.keys(handlers).map((name) => ({
      name,
      parameters: { type: 'object', properties: { tag: { type: 'string', maxLength: 32 }, n: { type: 'integer', minimum: 0 } }, required: ['tag'] },
      enabled_if: 'user.id != null',
    })),
    rewards: { type: 'object', properties: { ok: { type: 'number', minimum: 0, maximum: 1 } } },
  });
  return Env.create(def, { handlers, ...(options.snapshotEvery !== undefined ? { storeOptions: { snapshotEvery: options.snapshotEvery, retainDeltas: options.retainDeltas ?? 1_000 } } : {}) });
}

/** A step's work besides its tool: two fields replaced, a reward. */
export const bump = (params: Record<string, unknown>, state: unknown): { observation: null; patch: { op: 'replace'; path: string; value: number | string }[]; rewards: { ok: number } } => ({
  observation: null,
  patch: [
    { op: 'replace', path: '/counter', value: (state as { counter: number }).counter + 1 },
    { op: 'replace', path: '/last', value: params['tag'] as string },
  ],
  rewards: { ok: 1 },
});
