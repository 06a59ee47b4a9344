/**
 * A long-lived `agent serve`: its resident memory after 1,000, 10,000 and 20,000 finished episodes
 * (16 WebSocket clients that stay connected, each resetting and taking 3 steps of the weather env
 * with no simulated latency, its judge keeping up, over and over), and its CPU a second while idle. The server is the
 * built package in a process of its own (what a deployment runs); this process is the client.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';

const CLIENTS = 16;
// The env's judge takes ~200 ms, 16 at once by default: 80 verdicts a second behind steps that come
// at thousands a second would be a backlog growing without end (what is measured here is what the
// server keeps of finished episodes). As a judge on a batching server, 2,048 at once.
const JUDGE = JSON.stringify({ module: 'judges.ts', export: 'score', concurrency: 2048 });
const STEPS = 3;
const out = await mkdtemp(path.join(os.tmpdir(), 'serve-memory-bench-'));
const server = spawn(process.execPath, ['dist/bin/agent.js', 'serve', 'fixtures/weather', '--port', '0', '--json', '--out', out, '--tool-option', 'latency_scale=0', '--reward-source', `llm_score=${JUDGE}`], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise<string>((resolve, reject) => {
  server.once('exit', (code) => reject(new Error(`agent serve exited (${code}): run npm run build first`)));
  server.stdout.on('data', (chunk: Buffer) => {
    const line = String(chunk).split('\n').find((l) => l.includes('"listening"'));
    if (line) resolve((JSON.parse(line) as { ws: string }).ws);
  });
});
const pid = server.pid as number;
const rssMb = async (): Promise<number> => Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const cpuMs = async (): Promise<number> => {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10;
};

let finished = 0;
const client = async (until: () => boolean): Promise<WebSocket> => {
  const ws = new WebSocket(url);
  await new Promise((r) => ws.once('open', r));
  const ask = (m: object): Promise<void> =>
    new Promise((resolve) => {
      ws.once('message', () => resolve());
      ws.send(JSON.stringify(m));
    });
  void (async () => {
    while (!until()) {
      await ask({ type: 'reset', data: {} });
      for (let s = 0; s < STEPS; s++) await ask({ type: 'step', data: { name: 'get_weather', params: { city: 'Paris' } } });
      finished++;
    }
  })();
  return ws;
};

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
// Idle once its start-up has settled (the collections after loading the modules).
await sleep(30_000);
const idle0 = await cpuMs();
await sleep(30_000);
const idle = ((await cpuMs()) - idle0) / 30;
let stop = false;
const sockets = await Promise.all(Array.from({ length: CLIENTS }, () => client(() => stop)));
// Read while the clients go on: as many sessions open at both points.
const at = async (n: number): Promise<number> => {
  while (finished < n) await sleep(20);
  return rssMb();
};
const after1k = await at(1_000);
const t0 = performance.now();
const after10k = await at(10_000);
const after20k = await at(20_000);
stop = true;
const perS = (19_000 * 1000) / (performance.now() - t0);
const growth = (a: number, b: number): string => `${((b / a - 1) * 100).toFixed(1)} %`;
// The server keeps the last 10,000 finished episodes' rewards readable (keptEpisodes): it fills up to there, then stays flat.
console.log(`agent serve, long-lived: idle ${idle.toFixed(1)} ms of CPU a second; RSS after 1,000 episodes ${after1k.toFixed(0)} MB, after 10,000 ${after10k.toFixed(0)} MB (${growth(after1k, after10k)}), after 20,000 ${after20k.toFixed(0)} MB (${growth(after10k, after20k)} over 10,000); ${perS.toFixed(0)} episodes/s of ${STEPS} steps with ${CLIENTS} clients`);
for (const ws of sockets) ws.close();
server.kill('SIGINT');
await new Promise((r) => server.once('exit', r));
await rm(out, { recursive: true, force: true });
