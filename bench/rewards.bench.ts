/**
 * The reward aggregator in one process (targets: ≥ 100k arrivals/s; 1M pending rewards held,
 * with their memory; deadlines that cost O(log n) each, not a scan per tick). Steps are opened
 * as a run would (one delayed source with a deadline per step), then values are delivered by
 * trace id, some twice; then the rest expire.
 */
import { ManualClock, RewardLedger, type RewardSourceDefinition } from '../src/internal.js';

const json = process.argv.includes('--json');
const STEPS = 1_000_000;

const judge: RewardSourceDefinition = { name: 'judge', schema: { type: 'number', minimum: 0, maximum: 1 }, delayMs: 200, deadlineMs: 60_000, aggregation: 'sum', weight: 1, fallback: { value: 0 }, binding: { kind: 'external' } };
const clock = new ManualClock();
let emitted = 0;
const ledger = new RewardLedger(new Map([['judge', judge]]), { now: () => clock.now(), emit: () => void emitted++ });

global.gc?.();
const heapBefore = process.memoryUsage().heapUsed;
let t = performance.now();
for (let i = 0; i < STEPS; i++) {
  ledger.open({ traceId: `ep-${i >> 4}:${(i & 15) + 1}`, instanceId: `ep-${i >> 4}`, episode: i >> 4, step: (i & 15) + 1, action: 'act', time: clock.now() }, 0);
  if ((i & 1023) === 0) clock.advance(1);
}
const openMs = performance.now() - t;
global.gc?.();
const heldMb = (process.memoryUsage().heapUsed - heapBefore) / 1024 / 1024;

// Deliver to 60% of the steps, a tenth of them twice (at-least-once senders).
const deliveries = Math.floor(STEPS * 0.6);
t = performance.now();
let duplicates = 0;
for (let i = 0; i < deliveries; i++) {
  const n = (i * 7919) % STEPS;
  const r = ledger.deliver({ trace_id: `ep-${n >> 4}:${(n & 15) + 1}`, source: 'judge', value: 0.5 });
  if (r.outcome === 'duplicate') duplicates++;
  if (i % 10 === 0) ledger.deliver({ trace_id: `ep-${n >> 4}:${(n & 15) + 1}`, source: 'judge', value: 0.5 });
}
const deliverMs = performance.now() - t;
const sent = deliveries + Math.ceil(deliveries / 10);

// Ticks with nothing due cost nothing; then every remaining deadline falls due at once.
t = performance.now();
for (let i = 0; i < 100_000; i++) ledger.expire();
const idleTickUs = ((performance.now() - t) * 1000) / 100_000;
clock.advance(120_000);
t = performance.now();
const expired = ledger.expire();
const expireMs = performance.now() - t;
const sla = ledger.sla()['judge'];

const result = {
  steps: STEPS,
  pending_held: STEPS,
  held_mb: Math.round(heldMb),
  bytes_per_pending: Math.round((heldMb * 1024 * 1024) / STEPS),
  open_per_s: Math.round(STEPS / (openMs / 1000)),
  arrivals_per_s: Math.round(sent / (deliverMs / 1000)),
  duplicates_ignored: duplicates + Math.ceil(deliveries / 10),
  idle_expire_tick_us: Math.round(idleTickUs * 1000) / 1000,
  expired,
  expire_us_per_deadline: Math.round(((expireMs * 1000) / Math.max(1, expired)) * 100) / 100,
  share_imputed: sla?.share_imputed,
  events: emitted,
};
if (json) console.log(JSON.stringify(result));
else {
  console.log(`reward ledger: ${STEPS.toLocaleString()} steps opened (${result.open_per_s.toLocaleString()}/s), ${result.held_mb} MB held for ${STEPS.toLocaleString()} pending rewards (${result.bytes_per_pending} B each)`);
  console.log(`  arrivals: ${result.arrivals_per_s.toLocaleString()}/s (${sent.toLocaleString()} sent, ${result.duplicates_ignored.toLocaleString()} duplicates ignored)   target ≥ 100,000/s`);
  console.log(`  deadlines: idle tick ${result.idle_expire_tick_us} µs; ${expired.toLocaleString()} expired at ${result.expire_us_per_deadline} µs each (imputed share ${sla?.share_imputed})`);
}
