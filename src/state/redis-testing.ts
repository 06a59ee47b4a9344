/**
 * Test helpers for Redis-backed tests (not part of the package): the shared Redis (127.0.0.1:6379
 * unless AGENT_TEST_REDIS says otherwise) with the rule that CI fails when it is missing and a
 * developer machine skips with a hint, and Redis servers of a test's own (restarts, AOF) on a free port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, rm, stat, truncate } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';

export const TEST_REDIS_URL = process.env['AGENT_TEST_REDIS'] ?? 'redis://127.0.0.1:6379/0';

/** Whether the shared Redis answers; throws in CI when it does not, warns (naming `what` is skipped) elsewhere. */
export async function sharedRedisAvailable(what: string): Promise<boolean> {
  const probe = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2_000 });
  let ok = false;
  try {
    await probe.connect();
    await probe.ping();
    ok = true;
  } catch {
    ok = false;
  } finally {
    probe.disconnect();
  }
  if (!ok && process.env['CI']) throw new Error(`Redis is required in CI and is not reachable at ${TEST_REDIS_URL}`);
  if (!ok) console.warn(`skipping ${what}: no Redis at ${TEST_REDIS_URL} (start one with \`redis-server --save '' --port 6379\`)`);
  return ok;
}

/** Whether `redis-server` can be started here (tests that need their own server). */
export async function canStartRedis(): Promise<boolean> {
  const child = spawn('redis-server', ['--version'], { stdio: 'ignore' });
  const [code] = (await once(child, 'exit').catch(() => [1])) as [number | null];
  return code === 0;
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

export interface OwnRedis {
  readonly url: string;
  readonly port: number;
  /** SIGKILL: nothing flushed beyond what the fsync policy already wrote. */
  kill(): Promise<void>;
  /** Start again on the same port and data folder (the AOF is replayed). */
  start(): Promise<void>;
  /** Bytes in the AOF's newest incremental file: between two of Redis's writes, so at a command boundary. */
  aofSize(): Promise<number>;
  /**
   * SIGKILL, then cut the AOF back to `size` (from `aofSize()`): what was written after it never
   * reached the disk, as when the OS crashes under `appendfsync everysec`, or Redis is killed while
   * its write waits behind a slow background fsync (it has replied by then).
   */
  crashLosingWritesAfter(size: number): Promise<void>;
  /** Stop and remove the data folder. */
  close(): Promise<void>;
}

/** A redis-server of the test's own on a free port, with an append-only file under a temp folder. */
export async function startOwnRedis(options: { readonly appendfsync?: 'always' | 'everysec' | 'no'; readonly appendonly?: boolean } = {}): Promise<OwnRedis> {
  const port = await freePort();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agent-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', options.appendonly === false ? 'no' : 'yes', '--appendfsync', options.appendfsync ?? 'everysec'];
  let child: ChildProcess | undefined;
  const start = async (): Promise<void> => {
    child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    await new Promise<void>((resolve, reject) => {
      child?.stdout?.on('data', (c: Buffer) => {
        text += c.toString();
        if (text.includes('Ready to accept connections')) resolve();
      });
      child?.once('exit', (code) => reject(new Error(`redis-server exited ${code}: ${text.slice(-500)}`)));
    });
    child.stdout?.removeAllListeners('data');
    child.stdout?.resume();
  };
  const kill = async (): Promise<void> => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    c.kill('SIGKILL');
    await once(c, 'exit');
  };
  // Redis 7 keeps a multi-part AOF: appendonlydir/<name>.<n>.incr.aof receives the writes.
  const incrFile = async (): Promise<string> => {
    const aofDir = path.join(dir, 'appendonlydir');
    const number = (f: string): number => Number(/\.(\d+)\.incr\.aof$/.exec(f)?.[1] ?? -1);
    const newest = (await readdir(aofDir)).filter((f) => number(f) >= 0).sort((a, b) => number(b) - number(a))[0];
    if (!newest) throw new Error(`no incremental AOF in ${aofDir}: start the server with appendonly`);
    return path.join(aofDir, newest);
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}/0`,
    port,
    kill,
    start,
    async aofSize() {
      return (await stat(await incrFile())).size;
    },
    async crashLosingWritesAfter(size) {
      await kill();
      await truncate(await incrFile(), size);
    },
    async close() {
      await kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
