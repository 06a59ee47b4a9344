/**
 * `agent serve` side by side with OpenEnv's own server, on the same machine, driven by OpenEnv's
 * own client. Their server is `create_app` from OpenEnv's public source (FastAPI and uvicorn from
 * the package index) serving the smallest env that does what ours does here: a step that answers at
 * once (0 ms) or after a 20 ms await, its session isolated per WebSocket. Ours serves the same two
 * actions from an env.json. Both are driven with OpenEnv's `EnvClient` (the one TRL's integration
 * uses) at 1, 16, 64 and 256 sessions, the two servers taking turns line by line; then, since a
 * Python client is itself the ceiling well before either server, by a lean Node client (ws). Each
 * line reports steps/s, p50/p99, the server's RSS and its CPU per step (from /proc: the whole
 * process, its threads included), and ours as a ratio of theirs.
 *
 * Needs an OpenEnv checkout: OPENENV_SRC=/path/to/OpenEnv (`git clone
 * https://github.com/meta-pytorch/OpenEnv`). Its server and client are installed once into
 * .bench/openenv-venv (its own, beside the project's .venv), from that checkout without its
 * dependencies, then FastAPI, uvicorn, pydantic, websockets, requests and fastmcp (imported by its
 * HTTP server's module) from the package index. Nothing of OpenEnv is kept in this repository.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { writeSleepyEnv } from './lib/sleepy-env.js';
import { target } from './lib/targets.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const source = process.env['OPENENV_SRC'];
if (!source || !existsSync(path.join(source, 'src', 'openenv', 'core', 'env_server', 'http_server.py'))) {
  // Skipped, not failed: `npm run bench` goes on (OpenEnv's source is not something a clone has).
  console.log('openenv side by side skipped: set OPENENV_SRC to an OpenEnv checkout (git clone https://github.com/meta-pytorch/OpenEnv).');
  process.exit(0);
}
const bin = path.join(ROOT, 'dist', 'bin', 'agent.js');
if (!existsSync(bin)) throw new Error('dist/ is missing: run `npm run build` first (ours is measured as users install it)');

const venv = path.join(ROOT, '.bench', 'openenv-venv');
const python = path.join(venv, 'bin', 'python');
function sh(cmd: string, args: readonly string[]): void {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status})`);
}
if (!existsSync(python) || spawnSync(python, ['-c', 'import openenv.core.env_server, uvicorn']).status !== 0) {
  console.log(`making ${path.relative(ROOT, venv)} (once): OpenEnv from ${source}, its server's dependencies from the package index…`);
  sh('python3', ['-m', 'venv', venv]);
  // The machine's local indexes first when it has them (as scripts/test-python.sh): a pip that also
  // lists an index it cannot reach retries it five times per package before taking the local one.
  const local = ['/opt/pypi/simple', '/opt/pypi-more/simple'].filter((d) => existsSync(d)).map((d) => `file://${d}`);
  const indexes = local.length > 0 ? ['--index-url', local[0] as string, ...local.slice(1).flatMap((u) => ['--extra-index-url', u])] : [];
  sh(path.join(venv, 'bin', 'pip'), ['install', '-q', ...indexes, 'fastapi', 'uvicorn', 'pydantic', 'websockets', 'requests', 'fastmcp']);
  sh(path.join(venv, 'bin', 'pip'), ['install', '-q', '--no-deps', source]);
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'openenv-bench-'));
// Ours: the two actions, no state to speak of, a reward per step.
await writeSleepyEnv(dir);
// Theirs: the same two actions as an OpenEnv Environment, its async step awaited by the server itself.
await writeFile(
  path.join(dir, 'their_server.py'),
  `import asyncio, sys, uuid
from typing import Any, Dict, Optional
import uvicorn
from openenv.core.env_server import Action, Environment, Observation, State, create_app

class ToolAction(Action):
    name: str
    params: Dict[str, Any] = {}

class ToolObservation(Observation):
    observation: Any = None

class Sleepy(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> ToolObservation:
        self._state = State(episode_id=episode_id or uuid.uuid4().hex, step_count=0)
        return ToolObservation(observation=None, done=False, reward=None)

    def step(self, action: ToolAction, timeout_s: Optional[float] = None, **kwargs: Any) -> ToolObservation:
        raise RuntimeError("the server awaits step_async")

    async def step_async(self, action: ToolAction, timeout_s: Optional[float] = None, **kwargs: Any) -> ToolObservation:
        if action.name == "wait":
            await asyncio.sleep(0.02)
        self._state.step_count += 1
        return ToolObservation(observation="ok", done=False, reward=1.0)

    @property
    def state(self) -> State:
        return self._state

app = create_app(Sleepy, ToolAction, ToolObservation, env_name="sleepy", max_concurrent_envs=2048)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
`,
);
// OpenEnv's client, as a trainer holds it: one EnvClient per session, reset, then steps for a while.
await writeFile(
  path.join(dir, 'client.py'),
  `import asyncio, json, sys, time
from typing import Any, Dict
from openenv.core.env_client import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server import State

class ToolClient(EnvClient):
    def _step_payload(self, action: Dict[str, Any]) -> Dict[str, Any]:
        return action

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult:
        return StepResult(observation=payload.get("observation"), reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: Dict[str, Any]) -> State:
        return State(**payload)

async def main(url, sessions, seconds, action):
    lat = []
    stop = time.monotonic() + seconds
    async def one():
        async with ToolClient(base_url=url) as env:
            await env.reset()
            while time.monotonic() < stop:
                t0 = time.monotonic()
                await env.step({"name": action, "params": {}})
                lat.append(time.monotonic() - t0)
    t0 = time.monotonic()
    await asyncio.gather(*(one() for _ in range(sessions)))
    return len(lat) / (time.monotonic() - t0), sorted(lat)

url, sessions, seconds, action = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rate, lat = asyncio.run(main(url, sessions, seconds, action))
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(json.dumps({"rate": rate, "p50": q(0.5), "p99": q(0.99), "steps": len(lat)}))
`,
);

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

interface Server {
  readonly name: 'ours' | 'theirs';
  readonly url: string;
  readonly proc: ChildProcess;
}

async function startOurs(): Promise<Server> {
  const proc = spawn(process.execPath, [bin, 'serve', dir, '--port', '0', '--json', '--out', path.join(dir, 'runs'), '--max-steps', '1000000', '--max-sessions', '2048'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve(out.slice(0, nl));
    });
    proc.once('exit', (code) => reject(new Error(`agent serve exited ${code} before listening`)));
  });
  return { name: 'ours', url: (JSON.parse(line) as { url: string }).url, proc };
}

async function startTheirs(): Promise<Server> {
  const port = await freePort();
  // Its stderr kept aside: uvicorn prints a traceback for every client that hangs up (each line's end).
  const proc = spawn(python, [path.join(dir, 'their_server.py'), String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
  const url = `http://127.0.0.1:${port}`;
  // uvicorn says nothing at log level warning: ready when /health answers.
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`OpenEnv's server exited ${proc.exitCode}: ${stderr}`);
    const ok = await fetch(`${url}/health`).then((r) => r.ok, () => false);
    if (ok) break;
    if (i > 300) throw new Error("OpenEnv's server did not answer /health in 30 s");
    await new Promise((r) => setTimeout(r, 100));
  }
  return { name: 'theirs', url, proc };
}

interface Measured {
  readonly rate: number;
  readonly p50: number;
  readonly p99: number;
  readonly steps: number;
  readonly cpuUs: number;
  readonly rssMb: number;
}

async function withUsage(server: Server, drive: () => Promise<{ rate: number; p50: number; p99: number; steps: number }>): Promise<Measured> {
  const pid = server.proc.pid as number;
  const before = cpuTicks(pid);
  const r = await drive();
  const used = cpuTicks(pid) - before;
  return { ...r, cpuUs: (used * 1e6) / TICKS / Math.max(1, r.steps), rssMb: rssMb(pid) };
}

const TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
function cpuTicks(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return Number(fields[11]) + Number(fields[12]);
}
function rssMb(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;
}

function pythonClient(server: Server, sessions: number, seconds: number, action: string): Promise<Measured> {
  return withUsage(server, async () => {
    const child = spawn(python, [path.join(dir, 'client.py'), server.url, String(sessions), String(seconds), action], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((r) => child.on('close', r));
    if (code !== 0) throw new Error(`OpenEnv's client against ${server.name} exited ${code}`);
    return JSON.parse(out) as { rate: number; p50: number; p99: number; steps: number };
  });
}

/** The lean client: Node's ws in another process, OpenEnv's messages, one request in flight per session. */
const nodeClient = `
const WebSocket = require(${JSON.stringify(path.join(ROOT, 'node_modules', 'ws'))});
const [url, sessions, seconds, action] = [process.argv[1], +process.argv[2], +process.argv[3], process.argv[4]];
const lat = [];
const stop = performance.now() + seconds * 1000;
(async () => {
  const t0 = performance.now();
  await Promise.all(Array.from({ length: sessions }, async () => {
    const ws = new WebSocket(url.replace(/^http/, 'ws') + '/ws', { maxPayload: 1 << 27 });
    await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
    const ask = (m) => new Promise((resolve) => { ws.once('message', (raw) => resolve(JSON.parse(String(raw)))); ws.send(JSON.stringify(m)); });
    await ask({ type: 'reset', data: {} });
    while (performance.now() < stop) {
      const s = performance.now();
      const r = await ask({ type: 'step', data: { name: action, params: {} } });
      if (r.type === 'error') throw new Error(JSON.stringify(r.data));
      lat.push((performance.now() - s) / 1000);
    }
    ws.close();
  }));
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
  console.log(JSON.stringify({ rate: lat.length / ((performance.now() - t0) / 1000), p50: q(0.5), p99: q(0.99), steps: lat.length }));
})();
`;

function leanClient(server: Server, sessions: number, seconds: number, action: string): Promise<Measured> {
  return withUsage(server, async () => {
    const child = spawn(process.execPath, ['-e', nodeClient, server.url, String(sessions), String(seconds), action], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((r) => child.on('close', r));
    if (code !== 0) throw new Error(`the Node client against ${server.name} exited ${code}`);
    return JSON.parse(out) as { rate: number; p50: number; p99: number; steps: number };
  });
}

const SECONDS = Number(process.env['OPENENV_BENCH_SECONDS'] ?? 6);
const ours = await startOurs();
const theirs = await startTheirs();
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const ms = (s: number): string => (s * 1000).toFixed(1);
try {
  // Both warmed (JIT, imports, pools) before anything counts.
  for (const s of [ours, theirs]) await leanClient(s, 16, 1, 'now');
  let turn = 0;
  for (const [label, client] of [
    ["OpenEnv's Python client (EnvClient)", pythonClient],
    ['a lean Node client (ws)', leanClient],
  ] as const) {
    console.log(`\n${label}, ${SECONDS} s a line, the two servers taking turns:`);
    console.log('  sessions tool | steps/s ours / theirs (×) | p50 ms ours / theirs | p99 ms ours / theirs | CPU µs/step ours / theirs (×) | RSS MB ours / theirs (×)');
    for (const sessions of [1, 16, 64, 256]) {
      for (const action of ['now', 'wait'] as const) {
        // Alternate who goes first: a machine that warms or tires through a line does not favour one.
        const order = turn++ % 2 === 0 ? [ours, theirs] : [theirs, ours];
        const got = new Map<string, Measured>();
        for (const s of order) got.set(s.name, await client(s, sessions, SECONDS, action));
        const a = got.get('ours') as Measured;
        const b = got.get('theirs') as Measured;
        const tool = action === 'now' ? '0 ms' : '20 ms';
        console.log(
          `  ${String(sessions).padStart(8)} ${tool.padStart(5)} | ${fmt(a.rate)} / ${fmt(b.rate)} (${(a.rate / b.rate).toFixed(2)}×) | ${ms(a.p50)} / ${ms(b.p50)} | ${ms(a.p99)} / ${ms(b.p99)} | ${a.cpuUs.toFixed(0)} / ${b.cpuUs.toFixed(0)} (${(a.cpuUs / b.cpuUs).toFixed(2)}×) | ${a.rssMb.toFixed(0)} / ${b.rssMb.toFixed(0)} (${(a.rssMb / b.rssMb).toFixed(2)}×)`,
        );
        if (client === leanClient && action === 'now' && sessions >= 64) {
          console.log(`      steps/s ${target(`openenv: steps/s ours/theirs, ${sessions} sessions, 0 ms, lean client`, a.rate / b.rate, '×', { atLeast: 3 })}; CPU/step ${target(`openenv: CPU per step ours/theirs, ${sessions} sessions, 0 ms`, a.cpuUs / b.cpuUs, '×', { atMost: 1 / 3 })}`);
        }
        if (action === 'wait') console.log(`      p99 ${target(`openenv: p99 ours/theirs, ${sessions} sessions, 20 ms, ${client === leanClient ? 'lean' : 'OpenEnv'} client`, a.p99 / b.p99, '×', { atMost: 1 })}`);
      }
    }
  }
  console.log(`  RSS at the end: ours ${rssMb(ours.proc.pid as number).toFixed(0)} MB, theirs ${rssMb(theirs.proc.pid as number).toFixed(0)} MB: ${target('openenv: RSS ours/theirs', rssMb(ours.proc.pid as number) / rssMb(theirs.proc.pid as number), '×', { atMost: 1.2 })}`);
} finally {
  for (const s of [ours, theirs]) {
    s.proc.kill('SIGTERM');
    if (s.proc.exitCode === null) await new Promise((r) => s.proc.once('exit', r));
  }
  await rm(dir, { recursive: true, force: true });
}
