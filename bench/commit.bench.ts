/**
 * Commit cost on a large state: the full τ-bench airline database (300 flights, 2,000
 * reservations, 500 users, ~5 MB of JSON) as one state, validated by the airline fixture's state
 * schema (tau2's FlightDB; tau-bench's users gain the `user_id` tau2 added). A tool returns a
 * one-record patch; the commit (patch applied with structural sharing, the state validated, the
 * delta appended) should cost O(delta): target ≤ 100 µs, against a full validation per commit.
 * What that costs the readers: a wide map, once edited, is read through a view (wide-object.ts),
 * so the reads a τ-bench tool makes are timed on the edited map against the plain one.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { AgentEnv, applyPatch, loadEnvDefinition, validate, type JsonObject, type JsonValue, type ToolHandler } from '../src/internal.js';
import { target } from './lib/targets.js';

const json = process.argv.includes('--json');
const DATA = path.resolve(import.meta.dirname, '../../shared/realworld/tau-bench/airline/data');
const read = (name: string): Record<string, JsonObject> => JSON.parse(readFileSync(path.join(DATA, `${name}.json`), 'utf8')) as Record<string, JsonObject>;
const users = Object.fromEntries(Object.entries(read('users')).map(([id, u]) => [id, { ...u, user_id: id }]));
const db = { flights: read('flights'), reservations: read('reservations'), users };
const state = { db, session: { user_id: null } } as unknown as JsonObject;
const bytes = JSON.stringify(state).length;

const ids = Object.keys(db.reservations);
let i = 0;
// One record changes per call, alternating, so every patch is a real change: a reservation's cabin
// (inside the 2,000-key reservations map), or the session's user (a small object on the path).
const TOUCH: Record<string, ToolHandler> = {
  record: () => {
    const id = ids[i++ % ids.length] as string;
    return { patch: [{ op: 'replace', path: `/db/reservations/${id}/cabin`, value: i % 2 === 0 ? 'economy' : 'business' }] };
  },
  session: () => ({ patch: [{ op: 'replace', path: '/session/user_id', value: i++ % 2 === 0 ? 'mia_li_3668' : null }] }),
};

const definition = await loadEnvDefinition('fixtures/airline');

async function stepUs(kind: keyof typeof TOUCH): Promise<number> {
  const touch = TOUCH[kind] as ToolHandler;
  await using env = await AgentEnv.create(definition, { handlers: Object.fromEntries([...definition.actions.keys()].map((a) => [a, touch])) });
  const agent = env.createInstance();
  await agent.reset(state);
  const action = { name: 'get_user_details', params: { user_id: 'mia_li_3668' } };
  for (let k = 0; k < 2_000; k++) await agent.step(action); // warm-up: JIT, subschema compile
  const n = 20_000;
  const t0 = performance.now();
  for (let k = 0; k < n; k++) {
    const r = await agent.step(action);
    if (r.info.status !== 'resolved') throw new Error(JSON.stringify(r.info.error));
  }
  return ((performance.now() - t0) * 1000) / n;
}

const session = await stepUs('session');
const record = await stepUs('record');
const full = 20;
const t1 = performance.now();
for (let k = 0; k < full; k++) validate(definition.stateSchema, state);
const fullUs = ((performance.now() - t1) * 1000) / full;

// Reads, on the plain map and on the same map after one edit (a view over it).
// Frozen, as every map of a state is (reset copies and freezes the state it is given).
const deepFreeze = <T>(v: T): T => {
  if (typeof v === 'object' && v !== null) for (const c of Object.values(Object.freeze(v))) deepFreeze(c);
  return v;
};
const plain = deepFreeze(structuredClone(db.reservations)) as Record<string, JsonValue>;
const edited = (applyPatch({ m: plain } as JsonValue, [{ op: 'replace', path: `/m/${ids[0] as string}/cabin`, value: 'basic_economy' }]) as { m: Record<string, JsonValue> }).m;
function readNs(map: Record<string, JsonValue>, read: (m: Record<string, JsonValue>, k: number) => unknown, n: number): number {
  let sink = 0;
  for (let k = 0; k < n / 10; k++) sink += read(map, k) === undefined ? 0 : 1;
  const t0 = performance.now();
  for (let k = 0; k < n; k++) sink += read(map, k) === undefined ? 0 : 1;
  if (sink < 0) throw new Error('unreachable');
  return ((performance.now() - t0) * 1e6) / n;
}
const byKey = (m: Record<string, JsonValue>, k: number): unknown => m[ids[k % ids.length] as string];
const scan = (m: Record<string, JsonValue>): unknown => Object.values(m).length;
const reads = {
  keyPlainNs: readNs(plain, byKey, 1_000_000),
  keyViewNs: readNs(edited, byKey, 1_000_000),
  scanPlainUs: readNs(plain, scan, 2_000) / 1000,
  scanViewUs: readNs(edited, scan, 2_000) / 1000,
};

// τ-bench's own test tasks: every gold action sequence replayed on the full databases (the second
// pass timed, warm), per step: the tools' reads and writes through the views, validation, commits.
async function goldReplayUs(domain: string): Promise<number> {
  const dir = path.resolve(import.meta.dirname, '../fixtures/tau-bench', domain);
  await using env = await AgentEnv.open(dir);
  const tasks = readFileSync(path.join(dir, 'tasks', 'test.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { id: string; actions: { name: string; params: JsonObject }[] });
  const initial = env.definition.initialStates[0] as JsonValue;
  let us = 0;
  for (const pass of [0, 1]) {
    const t0 = performance.now();
    let steps = 0;
    for (const task of tasks) {
      const agent = env.createInstance({ id: `${task.id}-${pass}` });
      await agent.reset(initial);
      for (const a of task.actions) {
        await agent.step({ name: a.name, params: a.params });
        steps++;
      }
    }
    us = ((performance.now() - t0) * 1000) / steps;
  }
  return us;
}
const gold = { airlineUs: await goldReplayUs('airline'), retailUs: await goldReplayUs('retail') };

if (json) console.log(JSON.stringify({ stateBytes: bytes, sessionStepUs: session, recordStepUs: record, fullValidationUs: fullUs, ...reads, gold }));
else {
  console.log(`Commit on the full τ-bench airline db (${(bytes / 1e6).toFixed(1)} MB state), one-record patch, whole step (dispatch, tool, patch, validation, append):`);
  console.log(`  a field of a small object on the path (/session/user_id):      ${session.toFixed(1)} µs (target ≤ 100 µs)`);
  console.log(`  a field of one of the 2,000 reservations (/db/reservations/…): ${record.toFixed(1)} µs   ${target('commit inside a 2,000-key map (τ-bench reservations)', record, 'µs', { atMost: 100 })} (the map is not copied: an edit is a new version of a view over it)`);
  console.log(`  a full validation of that state, for comparison:               ${(fullUs / 1000).toFixed(1)} ms`);
  console.log('Reads of the 2,000 reservations, plain and after an edit (through the view):');
  console.log(`  one record by id:             ${reads.keyPlainNs.toFixed(0)} ns plain, ${reads.keyViewNs.toFixed(0)} ns view`);
  console.log(`  Object.values of all of them: ${reads.scanPlainUs.toFixed(0)} µs plain, ${reads.scanViewUs.toFixed(0)} µs view`);
  console.log(`τ-bench gold action replays (every test task, full databases, warm): airline ${gold.airlineUs.toFixed(0)} µs per step, retail ${gold.retailUs.toFixed(0)} µs`);
}
