/** `agent run --store redis://…` on the local Redis: states live there while episodes run, and nothing is left behind. */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { runAgent, scratch } from './testing.js';

const URL_ = process.env['AGENT_TEST_REDIS'] ?? 'redis://127.0.0.1:6379/0';
const admin = new Redis(URL_, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
const available = await admin.connect().then(
  () => true,
  () => false,
);
if (!available && process.env['CI']) throw new Error(`Redis is required in CI and is not reachable at ${URL_}`);
if (!available) console.warn(`skipping agent run --store tests: no Redis at ${URL_} (start one with \`redis-server --save '' --port 6379\`)`);

const tmp = scratch();
afterAll(async () => {
  await tmp.cleanup();
  if (available) await admin.quit();
  else admin.disconnect();
});

describe.runIf(available)('agent run --store redis://…', () => {
  it('runs with its states in Redis under agent:<run-id>:, and leaves no key behind', async () => {
    const out = await tmp.dir('agent-runs-');
    const seen = new Set<string>();
    // Watch the run's keys appear while it runs.
    const poll = setInterval(() => void admin.keys('agent:2*').then((keys) => keys.forEach((k) => seen.add(k.split(':')[1] ?? ''))), 5);
    const { code, stdout } = await runAgent(['run', 'fixtures/weather', '--episodes', '6', '--concurrency', '3', '--tool-option', 'latency_scale=0.05', '--store', URL_, '--out', out]);
    clearInterval(poll);
    expect(code).toBe(0);
    const runId = /run folder: .*\/([^/\s]+)\s*$/.exec(stdout)?.[1];
    expect(seen).toContain(runId);
    expect(await admin.keys(`agent:${runId}:*`)).toEqual([]);
  });

  it('exits 2 naming the address, without its password, when Redis cannot be reached', async () => {
    const { code, stderr } = await runAgent(['run', 'fixtures/weather', '--store', 'redis://:s3cret@127.0.0.1:1/0']);
    expect(code).toBe(2);
    expect(stderr).toMatch(/^error: cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1\/0: .*ECONNREFUSED/m);
    expect(stderr).not.toContain('s3cret');
  });
});
