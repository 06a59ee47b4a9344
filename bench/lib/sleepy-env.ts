/** The env the serve and threads benchmarks step (bench/serve.bench.ts, bench/openenv.bench.ts, bench/threads.bench.ts): `wait` answers after 20 ms, `now` at once, each with a reward. */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

export async function writeSleepyEnv(dir: string): Promise<void> {
  await writeFile(
    path.join(dir, 'env.json'),
    JSON.stringify({
      name: 'sleepy',
      state: { type: 'object', properties: { n: { type: 'integer' } } },
      initial_states: [{ n: 0 }],
      actions: [
        { name: 'wait', parameters: { type: 'object', properties: {} } },
        { name: 'now', parameters: { type: 'object', properties: {} } },
      ],
      rewards: { properties: { ok: { type: 'number' } } },
      module: 'tools.mjs',
    }),
  );
  await writeFile(
    path.join(dir, 'tools.mjs'),
    `export const wait = (_params, ctx) => new Promise((resolve, reject) => {
  const t = setTimeout(() => resolve({ observation: 'ok', rewards: { ok: 1 } }), 20);
  ctx.signal.addEventListener('abort', () => { clearTimeout(t); reject(ctx.signal.reason); }, { once: true });
});
export const now = () => ({ observation: 'ok', rewards: { ok: 1 } });
`,
  );
}
