/**
 * `agentic-rl-toolkit/store/redis`: episode states in Redis (deltas, snapshots, trimming into a
 * folder archive), and the health report `agent doctor` prints. Loads ioredis only here.
 *
 * @module agentic-rl-toolkit/store/redis
 */
export { RedisStateStore, type RedisStateStoreOptions } from './state/redis-store.js';
export { archiveToFolder, readArchive } from './state/archive.js';
export { storeHealth, type StoreHealth, type StoreHealthOptions } from './state/redis-health.js';
