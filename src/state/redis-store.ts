/**
 * The StateStore port on Redis: each instance's deltas in a stream, its snapshots in a sorted set
 * by seq, an index of delta times for `stateAt({time})`, and its head in a hash. Every key of one
 * instance carries the hash tag `{<instanceId>}`, so they share one Redis Cluster slot and a Lua
 * script can touch them atomically; a prefix separates deployments (and test runs).
 *
 * Appends are a Lua script: the seq is assigned with the write, and the writer states the seq it
 * expects, so two writers can never both write seq n (the second is told, refreshes its head and
 * retries). The writer's expectation is also what lets it send the full state only for the
 * appends that take a snapshot (every `snapshotEvery`), keeping an append O(delta) on the wire.
 * On a single Redis the appends of one turn of the event loop, of any instances, go as one script
 * call (a cluster gets one per append: their keys live in different slots).
 */
import type { Cluster, Redis } from 'ioredis';
import { raceAbort } from '../shared/abort.js';
import { AgentError, describeError } from '../shared/errors.js';
import { jsonCopy, type JsonValue } from '../shared/json.js';
import type { Patch } from './patch.js';
import { reconstructState, type Delta, type Snapshot, type StateBounds, type StatePoint, type StateStore, type StateStoreOptions, type TrimResult } from './store.js';

/** How `RedisStateStore` keeps histories: key prefix, snapshot interval, deltas kept, and where trimmed history is archived. */
export interface RedisStateStoreOptions extends StateStoreOptions {
  /** Prepended to every key (`agent:` by default): one per deployment, or per test run. */
  readonly prefix?: string;
  /** The connection's name in `CLIENT LIST` (with `connect`), to tell the toolkit's connections apart. */
  readonly connectionName?: string;
  /**
   * The fencing token this process holds for an instance (a distributed worker's lease on an
   * episode), or undefined for none. A fenced write is refused (LEASE_LOST) once a higher token
   * wrote to the instance: a worker that lost its lease can never overwrite its successor's history.
   */
  readonly fence?: (instanceId: string) => number | undefined;
}

// The fencing check every write script starts with (K and A: the script's keys and arguments, this
// instance's from k + 1 and a + 1; A[a + 1] the token, '' when unfenced): a write with a token below
// the instance's highest is refused; a higher one raises it.
const FENCE = `
if A[a + 1] ~= '' then
  local held = tonumber(redis.call('HGET', K[k + 1], 'fence') or '0')
  local token = tonumber(A[a + 1])
  if held > token then return redis.error_reply('FENCED ' .. held) end
  if held < token and redis.call('EXISTS', K[k + 1]) == 1 then redis.call('HSET', K[k + 1], 'fence', token) end
end`;

/** Sorted-set members are seqs padded so that their lexical order is their numeric order. */
const pad = (seq: number): string => String(seq).padStart(15, '0');

// K from k + 1: meta, deltas, snaps, times. A from a + 1: fence, expected seq, time, patch, trace
// id, snapshot JSON ('' for none), append token. The append token makes a retried append idempotent: a reply lost to a dropped
// connection is retried by the client, and finds its own entry already written at its seq.
const APPEND = `
local function append(K, A, k, a)
  local meta = redis.call('HMGET', K[k + 1], 'head_seq', 'head_time')
  local head = meta[1]
  if not head then return redis.error_reply('NOHISTORY') end
  ${FENCE}
  local expected = tonumber(A[a + 2])
  local seq = tonumber(head) + 1
  if seq ~= expected then
    local mine = redis.call('XRANGE', K[k + 2], expected .. '-1', expected .. '-1')
    if mine[1] then
      local fields = mine[1][2]
      for i = 1, #fields, 2 do
        if fields[i] == 'a' and fields[i + 1] == A[a + 7] then return expected end
      end
    end
    return redis.error_reply('CONFLICT ' .. head)
  end
  local time = A[a + 3]
  if tonumber(meta[2]) > tonumber(time) then time = meta[2] end
  -- The stream entry first: if it fails, nothing else has changed.
  redis.call('XADD', K[k + 2], seq .. '-1', 't', time, 'p', A[a + 4], 'r', A[a + 5], 'a', A[a + 7])
  redis.call('HSET', K[k + 1], 'head_seq', seq, 'head_time', time)
  redis.call('ZADD', K[k + 4], time, string.format('%015d', seq))
  if A[a + 6] ~= '' then redis.call('ZADD', K[k + 3], seq, A[a + 6]) end
  return seq
end`;

/** One append: KEYS and ARGV as above. */
export const APPEND_SCRIPT = `${APPEND}
return append(KEYS, ARGV, 0, 0)`;

/**
 * The appends of one turn of the event loop, of any instances (a single Redis, not a cluster: their
 * keys are in different slots): 4 KEYS and 7 ARGV each, in order. Replies with one entry per append:
 * its seq, or its error as a string starting with '!'.
 */
const APPEND_MANY_SCRIPT = `${APPEND}
local out = {}
for i = 0, #KEYS / 4 - 1 do
  local r = append(KEYS, ARGV, 4 * i, 7 * i)
  if type(r) == 'table' then r = '!' .. r.err end
  out[i + 1] = r
end
return out`;

// KEYS: meta, deltas, snaps, times. ARGV: fence, seq. Drops every delta after seq (and their snapshots and
// time index entries) and makes seq the head: the deltas of a step that was never committed.
export const REWIND_SCRIPT = `
local K, A, k, a = KEYS, ARGV, 0, 0
local head = tonumber(redis.call('HGET', KEYS[1], 'head_seq'))
if not head then return redis.error_reply('NOHISTORY') end
${FENCE}
local seq = tonumber(ARGV[2])
if seq >= head then return 0 end
if seq < tonumber(redis.call('HGET', KEYS[1], 'oldest_seq')) then return redis.error_reply('TRIMMED') end
local time = redis.call('HGET', KEYS[1], 'base_time')
local entry = redis.call('XRANGE', KEYS[2], seq .. '-1', seq .. '-1')
if entry[1] then
  local fields = entry[1][2]
  for i = 1, #fields, 2 do
    if fields[i] == 't' then time = fields[i + 1] end
  end
end
for s = seq + 1, head do
  redis.call('XDEL', KEYS[2], s .. '-1')
  redis.call('ZREM', KEYS[4], string.format('%015d', s))
end
-- A stream remembers the highest id it ever held: set it back, so that seq + 1 can be appended again.
redis.call('XSETID', KEYS[2], seq .. '-1')
redis.call('ZREMRANGEBYSCORE', KEYS[3], '(' .. seq, '+inf')
redis.call('HSET', KEYS[1], 'head_seq', seq, 'head_time', time)
return head - seq`;

// KEYS: meta, deltas, snaps, times. ARGV: fence, time, snapshot JSON. A new history (reset): a
// fenced one keeps the instance's token, so a worker that lost its lease cannot reset it either.
export const INIT_SCRIPT = `
local K, A, k, a = KEYS, ARGV, 0, 0
${FENCE}
local fence = redis.call('HGET', KEYS[1], 'fence')
if ARGV[1] ~= '' then fence = ARGV[1] end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', KEYS[1], 'head_seq', 0, 'head_time', ARGV[2], 'oldest_seq', 0, 'base_time', ARGV[2])
if fence then redis.call('HSET', KEYS[1], 'fence', fence) end
redis.call('ZADD', KEYS[3], 0, ARGV[3])
return 0`;

interface Keys {
  readonly meta: string;
  readonly deltas: string;
  readonly snaps: string;
  readonly times: string;
}

type Client = Redis | Cluster;

interface AppendBatch {
  readonly keys: string[];
  readonly args: (string | number)[];
  readonly waiters: { resolve(seq: number): void; reject(err: unknown): void }[];
}

/** Appends per script call at most: a turn that issues more sends several (a script blocks Redis while it runs). */
const BATCH_APPENDS = 512;

/** Episode states in Redis: each instance's deltas in a stream and snapshots in a hash, trimmed into a folder archive, shared by processes. */
export class RedisStateStore implements StateStore {
  readonly #redis: Client;
  readonly #ownsClient: boolean;
  readonly #prefix: string;
  readonly #snapshotEvery: number;
  readonly #retainDeltas: number | undefined;
  readonly #archive: StateStoreOptions['archive'];
  /** The head seq this process last wrote or read, per instance: the expectation an append states. */
  readonly #heads = new Map<string, number>();
  #appends = 0;
  /** Append tokens are this plus a count: unique across processes and stores. */
  readonly #tokenBase = `${process.pid}.${Math.random().toString(36).slice(2, 8)}.`;
  /** The appends of this turn of the event loop, not sent yet (a single Redis only). */
  #batch: AppendBatch | undefined;
  /** Appends of one instance from this process go one after another (they would only conflict). */
  readonly #chains = new Map<string, Promise<unknown>>();
  readonly #fence: RedisStateStoreOptions['fence'];

  /** Wrap a connected ioredis client (it stays the caller's to close). */
  constructor(redis: Client, options: RedisStateStoreOptions = {}, ownsClient = false) {
    this.#redis = redis;
    this.#ownsClient = ownsClient;
    this.#prefix = options.prefix ?? 'agent:';
    this.#snapshotEvery = Math.max(1, options.snapshotEvery ?? 50);
    this.#retainDeltas = options.retainDeltas;
    this.#archive = options.archive;
    redis.defineCommand('agentAppend', { numberOfKeys: 4, lua: APPEND_SCRIPT });
    // The number of keys comes first in its arguments: it varies with the batch.
    redis.defineCommand('agentAppendMany', { lua: APPEND_MANY_SCRIPT });
    redis.defineCommand('agentRewind', { numberOfKeys: 4, lua: REWIND_SCRIPT });
    redis.defineCommand('agentInit', { numberOfKeys: 4, lua: INIT_SCRIPT });
    this.#fence = options.fence;
  }

  #fenceArg(instanceId: string): string {
    const token = this.#fence?.(instanceId);
    return token === undefined ? '' : String(token);
  }

  #script(name: 'agentAppend' | 'agentRewind' | 'agentInit'): (...args: (string | number)[]) => Promise<number> {
    const run = (this.#redis as unknown as Record<string, (...args: (string | number)[]) => Promise<number>>)[name] as (...args: (string | number)[]) => Promise<number>;
    return (...args) => run.call(this.#redis, ...args);
  }

  /** The connection (shared with the run's journal, so that their commands reach Redis in one order). */
  get redis(): Client {
    return this.#redis;
  }

  /**
   * Connect to `redis://[:password@]host:port/db` and check the connection at once, so a wrong
   * URL is an error here, naming the address (never the password) and what to check.
   */
  static async connect(url: string, options: RedisStateStoreOptions & { readonly signal?: AbortSignal } = {}): Promise<RedisStateStore> {
    return new RedisStateStore(await openRedis(url, options.signal, options.connectionName), options, true);
  }

  #keys(instanceId: string): Keys {
    const base = `${this.#prefix}{${instanceId}}:`;
    return { meta: `${base}meta`, deltas: `${base}deltas`, snaps: `${base}snaps`, times: `${base}times` };
  }

  async init(instanceId: string, state: JsonValue, time: number, signal?: AbortSignal): Promise<void> {
    const k = this.#keys(instanceId);
    await raceAbort(this.#script('agentInit')(k.meta, k.deltas, k.snaps, k.times, this.#fenceArg(instanceId), String(time), JSON.stringify({ seq: 0, time, state })), signal).catch((err: unknown) => {
      throw fencedError(err, instanceId) ?? err;
    });
    this.#heads.set(instanceId, 0);
  }

  append(instanceId: string, delta: Omit<Delta, 'seq'>, stateAfter: JsonValue, signal?: AbortSignal): Promise<number> {
    const prior = this.#chains.get(instanceId);
    const next = prior ? prior.then(() => this.#append(instanceId, delta, stateAfter, signal)) : this.#append(instanceId, delta, stateAfter, signal);
    const settled = next.catch(() => undefined);
    this.#chains.set(instanceId, settled);
    void settled.then(() => {
      if (this.#chains.get(instanceId) === settled) this.#chains.delete(instanceId);
    });
    return next;
  }

  async #append(instanceId: string, delta: Omit<Delta, 'seq'>, stateAfter: JsonValue, signal?: AbortSignal): Promise<number> {
    const k = this.#keys(instanceId);
    // One token for every try of this append: a retry after a lost reply is recognised, not doubled.
    const token = `${this.#tokenBase}${++this.#appends}`;
    for (let attempt = 0; ; attempt++) {
      const head = this.#heads.get(instanceId) ?? (await this.#head(instanceId, signal));
      const seq = head + 1;
      const snapshot = seq % this.#snapshotEvery === 0 ? JSON.stringify({ seq, time: delta.time, state: stateAfter }) : '';
      try {
        const written = await raceAbort(this.#send(k, [this.#fenceArg(instanceId), seq, String(delta.time), JSON.stringify(delta.patch), delta.trace_id ?? '', snapshot, token]), signal);
        this.#heads.set(instanceId, written);
        if (this.#retainDeltas !== undefined && written % this.#snapshotEvery === 0) {
          const bounds = await this.bounds(instanceId, signal);
          if (bounds && bounds.headSeq - bounds.oldestSeq > this.#retainDeltas + this.#snapshotEvery) await this.trim(instanceId, this.#retainDeltas, signal);
        }
        return written;
      } catch (err) {
        const message = describeError(err);
        const fenced = fencedError(err, instanceId);
        if (fenced) throw fenced;
        if (message.includes('NOHISTORY')) {
          // This process wrote the instance's history, and Redis no longer has it: it lost writes.
          if (this.#heads.has(instanceId)) {
            throw new AgentError('STORE_WRITES_LOST', `Redis lost the history of '${instanceId}': this process had written up to seq ${head}`, {
              hint: 'Redis restarted without its data (no AOF, or not on disk yet). Resume the run: it continues from what Redis kept and reports what was lost.',
            });
          }
          throw new AgentError('STATE_SEQ_UNKNOWN', `instance '${instanceId}' has no state history`, { hint: 'Call init (reset on the instance) first.' });
        }
        // Another writer appended first: take its head and try again (each conflict means someone
        // progressed, so this converges; past many, something is wrong and it says so). A head
        // *behind* the one this process wrote means Redis lost acknowledged writes (a restart
        // without fsync): writing on would silently fork the history.
        if (message.includes('CONFLICT') && attempt < 100) {
          const now = Number(message.slice(message.indexOf('CONFLICT') + 9));
          if (now < head) {
            throw new AgentError('STORE_WRITES_LOST', `Redis lost acknowledged writes of '${instanceId}': its head is seq ${now}, this process wrote up to seq ${head}`, {
              hint: 'Redis restarted without having the last writes on disk (appendfsync everysec, or no AOF). Stop the run and resume it: it continues from what Redis kept and reports what was lost.',
            });
          }
          this.#heads.delete(instanceId);
          continue;
        }
        throw err;
      }
    }
  }

  /**
   * One append's script call. On a single Redis the appends of one turn of the event loop (a wave
   * of instances resumed by one reply) go as one call of APPEND_MANY_SCRIPT; on a cluster their
   * keys live in different slots, so each goes on its own.
   */
  #send(k: Keys, args: readonly (string | number)[]): Promise<number> {
    if (this.#redis.isCluster) return this.#script('agentAppend')(k.meta, k.deltas, k.snaps, k.times, ...args);
    let batch = this.#batch;
    if (!batch || batch.waiters.length >= BATCH_APPENDS) {
      const next: AppendBatch = (batch = this.#batch = { keys: [], args: [], waiters: [] });
      process.nextTick(() => {
        if (this.#batch === next) this.#batch = undefined;
        const many = (this.#redis as unknown as { agentAppendMany: (...a: (string | number)[]) => Promise<(number | string)[]> }).agentAppendMany;
        many.call(this.#redis, next.keys.length, ...next.keys, ...next.args).then(
          (replies) => {
            next.waiters.forEach((w, i) => {
              const r = replies[i];
              if (typeof r === 'number') w.resolve(r);
              else w.reject(new Error(typeof r === 'string' ? r.slice(1) : 'no reply for this append'));
            });
          },
          (err: unknown) => {
            for (const w of next.waiters) w.reject(err);
          },
        );
      });
    }
    batch.keys.push(k.meta, k.deltas, k.snaps, k.times);
    for (const a of args) batch.args.push(a);
    const waiters = batch.waiters;
    return new Promise<number>((resolve, reject) => waiters.push({ resolve, reject }));
  }

  async #head(instanceId: string, signal?: AbortSignal): Promise<number> {
    const head = await raceAbort(this.#redis.hget(this.#keys(instanceId).meta, 'head_seq'), signal);
    if (head === null) throw new AgentError('STATE_SEQ_UNKNOWN', `instance '${instanceId}' has no state history`, { hint: 'Call init (reset on the instance) first.' });
    return Number(head);
  }

  async read(instanceId: string, fromSeq: number, toSeq: number, signal?: AbortSignal): Promise<Delta[]> {
    if (toSeq < fromSeq) return [];
    const k = this.#keys(instanceId);
    const key = k.deltas;
    // The bounds come in the same round trip, so that a delta missing from the range is seen (a hole replays to another state).
    const replies = await raceAbort(this.#redis.multi().hmget(k.meta, 'head_seq', 'oldest_seq').xrange(key, `${Math.max(1, fromSeq)}-1`, `${toSeq}-1`).exec(), signal);
    const [[, meta], [, range]] = (replies ?? []) as [[unknown, (string | null)[]], [unknown, [string, string[]][]]];
    const entries = range ?? [];
    const deltas = entries.map(([id, fields]) => {
      const f = fieldsOf(fields);
      const seq = Number(id.slice(0, id.indexOf('-')));
      const time = Number(f['t']);
      const patch = parseStored(f['p'], key, id);
      if (!Array.isArray(patch) || !Number.isFinite(time) || !Number.isInteger(seq)) throw corrupt(key, id, 'a delta needs a seq id, a time and a JSON Patch');
      const traceId = f['r'];
      return traceId ? { seq, time, patch: patch as Patch, trace_id: traceId } : { seq, time, patch: patch as Patch };
    });
    if (meta?.[0] != null) {
      const first = Math.max(1, fromSeq, Number(meta[1] ?? 0) + 1);
      const last = Math.min(toSeq, Number(meta[0]));
      for (let i = 0, seq = first; seq <= last; i++, seq++) {
        if (deltas[i]?.seq !== seq) throw new AgentError('STATE_CORRUPT', `Redis key '${key}' has no delta for seq ${seq} (its head is seq ${meta[0]}): the history has a hole`, { hint: 'Something removed a delta: a state rebuilt across the hole would be wrong. Restore the key from a backup, or drop the instance and start its episode again.' });
      }
    }
    return deltas;
  }

  async snapshotAt(instanceId: string, seq: number, signal?: AbortSignal): Promise<Snapshot | undefined> {
    const [raw] = await raceAbort(this.#redis.zrevrangebyscore(this.#keys(instanceId).snaps, seq, '-inf', 'LIMIT', 0, 1), signal);
    if (raw === undefined) return undefined;
    const key = this.#keys(instanceId).snaps;
    const s = parseStored(raw, key, `the snapshot at or before seq ${seq}`) as Partial<Snapshot> | null;
    if (s === null || typeof s !== 'object' || typeof s.seq !== 'number' || typeof s.time !== 'number' || s.state === undefined) throw corrupt(key, `the snapshot at or before seq ${seq}`, 'a snapshot needs seq, time and state');
    // Frozen like every state the toolkit hands out.
    return { seq: s.seq, time: s.time, state: jsonCopy(s.state) };
  }

  async bounds(instanceId: string, signal?: AbortSignal): Promise<StateBounds | undefined> {
    const [head, time, oldest] = await raceAbort(this.#redis.hmget(this.#keys(instanceId).meta, 'head_seq', 'head_time', 'oldest_seq'), signal);
    if (head === null || head === undefined) return undefined;
    return { oldestSeq: Number(oldest), headSeq: Number(head), headTime: Number(time) };
  }

  async seqAtTime(instanceId: string, time: number, signal?: AbortSignal): Promise<number | undefined> {
    const k = this.#keys(instanceId);
    const [[, meta], [, newest]] = (await raceAbort(
      this.#redis
        .multi()
        .hmget(k.meta, 'oldest_seq', 'base_time')
        .zrevrangebyscore(k.times, String(time), '-inf', 'LIMIT', 0, 1)
        .exec(),
      signal,
    )) as [[unknown, (string | null)[]], [unknown, string[]]];
    const [oldest, baseTime] = meta;
    if (oldest === null || oldest === undefined) return undefined;
    // The oldest kept snapshot's time: the base's, or the newest removed delta's after a trim.
    const oldestTime = Number(baseTime);
    if (time < oldestTime) return undefined;
    const seq = newest[0] === undefined ? 0 : Number(newest[0]);
    return Math.max(seq, Number(oldest));
  }

  stateAt(instanceId: string, point: StatePoint, signal?: AbortSignal): Promise<Snapshot> {
    return reconstructState(this, instanceId, point, signal);
  }

  async trim(instanceId: string, keepDeltas: number, signal?: AbortSignal): Promise<TrimResult> {
    const bounds = await this.bounds(instanceId, signal);
    if (!bounds) return { removedDeltas: 0, oldestSeq: 0 };
    const cut = await this.snapshotAt(instanceId, bounds.headSeq - Math.max(0, keepDeltas), signal);
    if (!cut || cut.seq <= bounds.oldestSeq) return { removedDeltas: 0, oldestSeq: bounds.oldestSeq };
    const removed = await this.read(instanceId, bounds.oldestSeq + 1, cut.seq, signal);
    // Archived first: trimming never loses history silently.
    if (removed.length > 0 && this.#archive) await this.#archive(instanceId, removed);
    const k = this.#keys(instanceId);
    const tx = this.#redis
      .multi()
      .xtrim(k.deltas, 'MINID', `${cut.seq + 1}-1`)
      .zremrangebyscore(k.snaps, '-inf', `(${cut.seq}`)
      .zremrangebyscore(k.times, '-inf', `(${cut.time}`)
      .hset(k.meta, 'oldest_seq', cut.seq, 'base_time', String(cut.time));
    // Deltas that share the cut's time are removed one by one (times may repeat within a ms).
    const sameTime = removed.filter((d) => d.time === cut.time).map((d) => pad(d.seq));
    if (sameTime.length > 0) tx.zrem(k.times, ...sameTime);
    await raceAbort(tx.exec(), signal);
    return { removedDeltas: removed.length, oldestSeq: cut.seq };
  }

  /**
   * Make `seq` the head again, removing the deltas after it: on resume, the deltas of steps whose
   * commit never reached the run's journal. Returns how many were removed.
   */
  async rewind(instanceId: string, seq: number, signal?: AbortSignal): Promise<number> {
    const k = this.#keys(instanceId);
    try {
      const removed = await raceAbort(this.#script('agentRewind')(k.meta, k.deltas, k.snaps, k.times, this.#fenceArg(instanceId), seq), signal);
      this.#heads.delete(instanceId);
      return removed;
    } catch (err) {
      const message = describeError(err);
      if (message.includes('NOHISTORY')) throw new AgentError('STATE_SEQ_UNKNOWN', `instance '${instanceId}' has no state history`);
      if (message.includes('TRIMMED')) throw new AgentError('STATE_SEQ_TRIMMED', `instance '${instanceId}': cannot rewind to seq ${seq}, it was trimmed`);
      throw fencedError(err, instanceId) ?? err;
    }
  }

  async drop(instanceId: string, signal?: AbortSignal): Promise<void> {
    const k = this.#keys(instanceId);
    await raceAbort(this.#redis.del(k.meta, k.deltas, k.snaps, k.times), signal);
    this.#heads.delete(instanceId);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#heads.clear();
    if (this.#ownsClient) await this.#redis.quit().catch(() => undefined);
  }
}

/** Data in Redis that is not what this store wrote: a typed error naming the key, never a raw SyntaxError. */
function corrupt(key: string, where: string, what: string): AgentError {
  return new AgentError('STATE_CORRUPT', `Redis key '${key}' (${where}) is malformed: ${what}`, {
    hint: 'Something other than the toolkit wrote there. Restore it from a backup, or drop the instance and reset it.',
  });
}

function parseStored(text: string | undefined, key: string, where: string): unknown {
  try {
    return JSON.parse(text ?? '');
  } catch (err) {
    throw corrupt(key, where, `not JSON (${describeError(err)})`);
  }
}

function fieldsOf(list: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i] as string] = list[i + 1] as string;
  return out;
}

/**
 * A connected ioredis client (auto-pipelining on), or a usage error that names the address
 * (never the password), the socket's own error and what to check.
 */
/** A write refused by the fence: this process's lease on the instance has passed to another. */
function fencedError(err: unknown, instanceId: string): AgentError | undefined {
  const held = /FENCED (\d+)/.exec(describeError(err));
  if (!held) return undefined;
  return new AgentError('LEASE_LOST', `'${instanceId}' is held by a newer lease (token ${held[1]}): this worker lost its lease, so its write was refused`, {
    hint: 'Another worker continues the episode from its last committed step; nothing to do.',
  });
}

export async function openRedis(url: string, signal?: AbortSignal, connectionName = 'agentic-rl-toolkit'): Promise<Redis> {
  let path = '';
  try {
    path = new URL(url).pathname.replace(/^\//, '');
  } catch {
    throw new AgentError('BAD_USAGE', `'${redactUrl(url)}' is not a Redis URL`, { hint: 'Pass redis://host:port/db, e.g. redis://127.0.0.1:6379/0.' });
  }
  if (path !== '' && !/^\d+$/.test(path)) throw new AgentError('BAD_USAGE', `the Redis URL ${redactUrl(url)} names database '${path}', not an index`, { hint: 'Databases are numbers: redis://host:port/0 (the default), /1, …' });
  const { Redis: RedisClient } = await import('ioredis');
  // A short disconnectTimeout: after a failed connect, ioredis would otherwise keep a 2 s timer alive.
  const redis = new RedisClient(url, { connectionName, enableAutoPipelining: true, lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 5_000, disconnectTimeout: 100, retryStrategy: () => null });
  // Connection errors reach the caller through the promises below; without a listener ioredis
  // would also print them as unhandled. Its rejection says "Connection is closed"; the socket's
  // own error (ECONNREFUSED…) says more.
  let lastError: unknown;
  const onError = (err: unknown): void => {
    lastError = err;
  };
  redis.on('error', onError);
  try {
    await raceAbort(redis.connect(), signal);
    await raceAbort(redis.ping(), signal);
  } catch (err) {
    redis.disconnect();
    throw new AgentError('BAD_USAGE', `cannot reach Redis at ${redactUrl(url)}: ${describeError(lastError ?? err)}`, {
      cause: err,
      hint: 'Check that a Redis server runs there (redis-cli -u <url> ping) and that the URL, port and password are right.',
    });
  }
  // ioredis selects the URL's database as it connects, and goes on in database 0 when the server
  // refuses it: selecting it again here makes a database the server does not have an error.
  const db = redis.options.db ?? 0;
  if (db !== 0) {
    try {
      await raceAbort(redis.select(db), signal);
    } catch (err) {
      redis.disconnect();
      throw new AgentError('BAD_USAGE', `Redis at ${redactUrl(url)} has no database ${db}: ${describeError(err)}`, { cause: err, hint: 'Pick a database index the server has (0 to `CONFIG GET databases` - 1), e.g. redis://host:6379/0.' });
    }
  }
  redis.off('error', onError);
  // Connected: from now on a dropped connection is re-made with backoff, and commands wait for it
  // (a blip pauses the run instead of failing its traces). The first connect did not retry, so a
  // wrong URL failed at once above.
  redis.options.retryStrategy = (times: number) => Math.min(50 * 2 ** times, 2_000);
  redis.options.maxRetriesPerRequest = 20;
  redis.on('error', () => {
    // Reconnection errors: ioredis retries; commands fail only after maxRetriesPerRequest.
  });
  return redis;
}

/** The URL without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//***@');
  }
}
