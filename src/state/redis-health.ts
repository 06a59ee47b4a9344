/**
 * The health of a Redis-backed store, for `agent doctor --store redis://…`: the server, its
 * memory against its limit, and the toolkit's streams (the article's first pitfall is an
 * unbounded delta log), with a warning for each stream or memory figure above its threshold.
 */
import { raceAbort } from '../shared/abort.js';
import { openRedis, redactUrl } from './redis-store.js';

/** What `agent doctor` reports of a Redis store: its version, memory used and allowed, episode instances, the longest streams, warnings and notes. */
export interface StoreHealth {
  readonly url: string;
  readonly redisVersion: string;
  readonly usedMemoryBytes: number;
  /** 0 when the server has no limit. */
  readonly maxMemoryBytes: number;
  /** Instances (delta streams) under the prefix. */
  readonly instances: number;
  /** The longest delta streams, longest first. */
  readonly longestStreams: readonly { readonly key: string; readonly length: number }[];
  /** Growth past a threshold: `agent doctor` exits 1 on any. */
  readonly warnings: readonly string[];
  /** Advice that is not a fault (a server without maxmemory). */
  readonly notes: readonly string[];
}

/** Where `storeHealth` looks (key prefix) and its thresholds (stream length, share of maxmemory). */
export interface StoreHealthOptions {
  /** Key prefix to inspect (default `agent:`, every run). */
  readonly prefix?: string;
  /** Warn about a stream longer than this (default 100,000 deltas). */
  readonly maxStreamLength?: number;
  /** Warn when used memory passes this share of `maxmemory` (default 0.8). */
  readonly memoryShare?: number;
  readonly signal?: AbortSignal;
}

function info(text: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*)$`, 'm').exec(text)?.[1]?.trim();
}

/** Checks a Redis store for a durable run: memory, eviction policy, persistence, stream lengths, stale runs. */
export async function storeHealth(url: string, options: StoreHealthOptions = {}): Promise<StoreHealth> {
  const signal = options.signal;
  const redis = await openRedis(url, signal);
  try {
    const server = await raceAbort(redis.info('server'), signal);
    const memory = await raceAbort(redis.info('memory'), signal);
    const prefix = options.prefix ?? 'agent:';
    const streams: { key: string; length: number }[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await raceAbort(redis.scan(cursor, 'MATCH', `${prefix}*:deltas`, 'COUNT', 1000), signal);
      cursor = next;
      const lengths = keys.length === 0 ? [] : await raceAbort(Promise.all(keys.map((k) => redis.xlen(k))), signal);
      keys.forEach((key, i) => streams.push({ key, length: lengths[i] ?? 0 }));
    } while (cursor !== '0');
    streams.sort((a, b) => b.length - a.length);
    const used = Number(info(memory, 'used_memory') ?? 0);
    const max = Number(info(memory, 'maxmemory') ?? 0);
    const maxLength = options.maxStreamLength ?? 100_000;
    const share = options.memoryShare ?? 0.8;
    const warnings: string[] = [];
    for (const s of streams) if (s.length > maxLength) warnings.push(`stream ${s.key} holds ${s.length} deltas (over ${maxLength}): set retainDeltas (agent run trims at 1,000) or trim it`);
    if (max > 0 && used > share * max) warnings.push(`Redis uses ${used} of its ${max} bytes (over ${Math.round(share * 100)}%): trim histories or raise maxmemory`);
    const notes = max === 0 ? ['Redis has no maxmemory: a run that never trims could take all the memory of the machine'] : [];
    return { url: redactUrl(url), redisVersion: info(server, 'redis_version') ?? 'unknown', usedMemoryBytes: used, maxMemoryBytes: max, instances: streams.length, longestStreams: streams.slice(0, 5), warnings, notes };
  } finally {
    await redis.quit().catch(() => undefined);
  }
}
