/**
 * Hostile code, each case one that must be contained: the network, the host's files, a fork bomb,
 * 4 GB of memory, a loop whose children ignore SIGTERM, 100 MB on stdout, CPU, and the process that
 * started the sandbox killed with SIGKILL. Every case runs inside the limits it tests (the engine
 * puts the command in its cgroup before it starts, and sweeps the cgroup after). Needs bubblewrap:
 * in CI its absence fails the suite; elsewhere the suite is skipped saying how to install it.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAgentError } from '../shared/errors.js';
import { bwrapForTests } from './bwrap-testing.js';
import { parseAllowedHost } from './egress.js';
import { Sandbox, type SandboxCommand } from './sandbox.js';

const available = bwrapForTests('the sandbox tests');

const dirs: string[] = [];
async function workspace(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'sandbox-test-'));
  dirs.push(d);
  return d;
}

/** Host processes whose command line holds `marker`. */
function hostProcesses(marker: string): string[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .flatMap((p) => {
      try {
        const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ');
        return cmd.includes(marker) ? [cmd] : [];
      } catch {
        return [];
      }
    });
}

/** Our cgroups left under the sandbox's parent (named `<pid>-<n>`). */
function cgroupsOf(pid: number): string[] {
  const parent = '/sys/fs/cgroup/pids/agentic-rl-sandbox';
  return existsSync(parent) ? readdirSync(parent).filter((n) => n.startsWith(`${pid}-`)) : [];
}

describe.skipIf(!available)('the sandbox', () => {
  let sandbox: Sandbox;
  let server: Server;
  let port: number;
  let connections = 0;
  beforeAll(async () => {
    sandbox = await Sandbox.open();
    server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });
  const run = async (argv: readonly string[], extra: Partial<SandboxCommand> = {}): Promise<Awaited<ReturnType<Sandbox['run']>>> => sandbox.run({ argv, workspace: await workspace(), ...extra });

  it('says how it bounds processes and memory', () => {
    expect(sandbox.mechanism.mode).toBe('isolated');
    expect(sandbox.mechanism.bwrap).toMatch(/^bubblewrap /);
    // These machines mount cgroup v1 and run the tests as root.
    if (process.getuid?.() === 0 && existsSync('/sys/fs/cgroup/pids/cgroup.procs')) expect(sandbox.mechanism.limits).toBe('cgroup-v1');
  });

  it('reaches no host port and resolves no name: the network namespace has only its own loopback', async () => {
    const host = Object.values(os.networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal)?.address ?? '127.0.0.1';
    const probe = `
import socket
for h in ("127.0.0.1", ${JSON.stringify(host)}):
    try:
        socket.create_connection((h, ${port}), timeout=2); print(h, "connected")
    except OSError as e:
        print(h, "refused", type(e).__name__)
try:
    socket.getaddrinfo("example.com", 80); print("resolved")
except OSError:
    print("no name")
`;
    const r = await run(['python3', '-c', probe]);
    expect(r.exit_code).toBe(0);
    expect(r.stdout).not.toContain('connected');
    expect(r.stdout).toContain('no name');
    expect(connections).toBe(0);
  });

  it("sees none of the host's files and writes only its workspace", async () => {
    const project = path.resolve('package.json');
    const ws = await workspace();
    const outside = path.join(os.tmpdir(), `sandbox-escape-${process.pid}`);
    const r = await sandbox.run({
      argv: ['sh', '-c', `cat ${project} /etc/shadow /root/.profile /etc/hostname 2>&1; ls /home 2>&1; echo x > ${outside} 2>&1; echo y > /usr/escape 2>&1; echo kept > /workspace/out.txt; id -u`],
      workspace: ws,
    });
    for (const file of [project, '/etc/shadow', '/root/.profile']) expect(r.stdout).toContain(`${file}: No such file or directory`);
    expect(r.stdout).toContain("cannot access '/home'");
    expect(r.stderr).toMatch(/Read-only file system/);
    expect(existsSync(outside)).toBe(false);
    expect(existsSync('/usr/escape')).toBe(false);
    expect(await readFile(path.join(ws, 'out.txt'), 'utf8')).toBe('kept\n');
    expect(r.stdout.trim().split('\n').at(-1)).toBe('65534');
  });

  it('contains a fork bomb in its process limit, leaving nothing behind', async () => {
    const r = await run(['sh', '-c', 'bomb() { bomb | bomb & }; bomb; sleep 0.5'], { limits: { pids: 32, timeoutMs: 5_000 } });
    expect(r.stderr).toMatch(/fork/i);
    expect(cgroupsOf(process.pid)).toEqual([]);
  });

  it('ends a command that allocates 4 GB at its memory limit, saying it was the OOM killer', async () => {
    const r = await run(['python3', '-c', 'b = bytearray(4 * 1024**3); print("allocated")'], { limits: { memoryMb: 128 } });
    expect(r.stdout).not.toContain('allocated');
    expect(sandbox.mechanism.limits === 'uid-rlimit' ? r.stderr : r.oom).toBeTruthy();
  });

  it('kills a loop whose children ignore SIGTERM at its wall-time limit, children and all', async () => {
    const marker = `sleep 987.${process.pid}`;
    const r = await run(['sh', '-c', `trap '' TERM; (trap '' TERM; ${marker}) & (trap '' TERM; ${marker}) & while :; do :; done`], { limits: { timeoutMs: 300 } });
    expect(r).toMatchObject({ timed_out: true, signal: 'SIGKILL', exit_code: null });
    expect(hostProcesses(marker)).toEqual([]);
  });

  it('keeps the first bytes of 100 MB on stdout, counts the rest and marks the cut', async () => {
    const r = await run(['python3', '-c', 'import sys; sys.stdout.write("x" * 100_000_000)'], { limits: { outputBytes: 1_000 } });
    expect(r).toMatchObject({ exit_code: 0, truncated: true, stdout_bytes: 100_000_000 });
    expect(r.stdout).toBe(`${'x'.repeat(1_000)}\n[… truncated: 100000000 bytes in all, the first 1000 kept]`);
  });

  it('stops a command at its CPU seconds and a file at its size limit', async () => {
    expect(await run(['python3', '-c', 'while True: pass'], { limits: { cpuSeconds: 1 } })).toMatchObject({ signal: 'SIGXCPU', timed_out: false });
    const big = await run(['sh', '-c', 'head -c 3145728 /dev/zero > big'], { limits: { fileSizeMb: 1 } });
    expect(big.signal).toBe('SIGXFSZ');
  });

  it('passes stdin and the environment it is given, and nothing of ours', async () => {
    process.env['SANDBOX_TEST_SECRET'] = 'hunter2';
    try {
      const r = await run(['sh', '-c', 'cat; echo; env | sort'], { stdin: 'from stdin', env: { GREETING: 'hi' } });
      expect(r.stdout).toContain('from stdin');
      expect(r.stdout).toContain('GREETING=hi');
      expect(r.stdout).toContain('HOME=/workspace');
      expect(r.stdout).not.toContain('hunter2');
    } finally {
      delete process.env['SANDBOX_TEST_SECRET'];
    }
  });

  it('leaves nothing behind when the process that started it is killed with SIGKILL mid-command; the next one sweeps its cgroup', async () => {
    const marker = `sleep 988.${process.pid}`;
    const script = path.join(await workspace(), 'holder.mts');
    await writeFile(script, `import { Sandbox } from ${JSON.stringify(path.resolve('src/sandbox/sandbox.ts'))};
const sandbox = await Sandbox.open();
const ws = ${JSON.stringify(await workspace())};
void sandbox.run({ argv: ['sh', '-c', "trap '' TERM; ${marker} & while :; do :; done"], workspace: ws, limits: { timeoutMs: 60_000 } });
setTimeout(() => console.log('running'), 300);
`);
    const holder = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => holder.stdout.on('data', () => resolve()));
    // Under a loaded machine the sandbox may take longer than the holder's 300 ms to start its command.
    for (let i = 0; i < 500 && hostProcesses(marker).length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(hostProcesses(marker).length).toBeGreaterThan(0);
    const pid = holder.pid as number;
    holder.kill('SIGKILL');
    await new Promise((resolve) => holder.once('exit', resolve));
    // Death with the parent is asynchronous: wait for the kernel to tear the namespace down.
    for (let i = 0; i < 1_000 && hostProcesses(marker).length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(hostProcesses(marker)).toEqual([]);
    if (sandbox.mechanism.limits === 'cgroup-v1') {
      expect(cgroupsOf(pid)).toHaveLength(1);
      await (await Sandbox.open()).run({ argv: ['true'], workspace: await workspace() });
      expect(cgroupsOf(pid)).toEqual([]);
    }
  });

  it('bounds processes and memory by an unprivileged uid where no cgroup is used', async () => {
    const unprivileged = await Sandbox.open({ limits: 'uid-rlimit' });
    expect(unprivileged.mechanism.limits).toBe('uid-rlimit');
    const bomb = await unprivileged.run({ argv: ['sh', '-c', 'bomb() { bomb | bomb & }; bomb; sleep 0.5'], workspace: await workspace(), limits: { pids: 32, timeoutMs: 5_000 } });
    expect(bomb.stderr).toMatch(/fork/i);
    const memory = await unprivileged.run({ argv: ['python3', '-c', 'b = bytearray(4 * 1024**3)'], workspace: await workspace(), limits: { memoryMb: 256 } });
    expect(memory.stderr).toContain('MemoryError');
  });
});

describe.skipIf(!available)('a sandbox with allowed hosts', () => {
  const servers: HttpServer[] = [];
  const hits: string[] = [];
  const serve = async (name: string): Promise<number> => {
    const server = createHttpServer((req, res) => {
      hits.push(`${name} ${req.url ?? ''}`);
      res.end(`hello from ${name}`);
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as { port: number }).port;
  };
  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });

  it('reaches a listed host through its proxy, and nothing else: another port, a raw socket, a name, a tunnel elsewhere', async () => {
    const allowed = await serve('allowed');
    const other = await serve('other');
    await using sandbox = await Sandbox.open({ allowHosts: [parseAllowedHost(`127.0.0.1:${allowed}`)] });
    expect(sandbox.mechanism.allowed_hosts).toEqual([`127.0.0.1:${allowed}`]);
    const probe = `
import http.client, os, socket, urllib.request
print("via proxy:", urllib.request.urlopen("http://127.0.0.1:${allowed}/a").read().decode())
try:
    urllib.request.urlopen("http://127.0.0.1:${other}/b")
except urllib.error.HTTPError as e:
    print("other port:", e.code, e.read().decode().strip())
try:
    socket.create_connection(("127.0.0.1", ${allowed}), timeout=2); print("raw connected")
except OSError as e:
    print("raw:", type(e).__name__)
try:
    socket.getaddrinfo("example.com", 443); print("resolved")
except OSError:
    print("no name")
c = http.client.HTTPConnection("127.0.0.1", 3128)
c.set_tunnel("127.0.0.1", ${allowed})
c.request("GET", "/c")
print("tunnel:", c.getresponse().read().decode())
c = http.client.HTTPConnection("127.0.0.1", 3128)
c.set_tunnel("127.0.0.1", ${other})
try:
    c.request("GET", "/d")
except OSError as e:
    print("tunnel elsewhere:", e)
print("proxy:", os.environ["HTTPS_PROXY"])
`;
    const r = await sandbox.run({ argv: ['python3', '-c', probe], workspace: await workspace() });
    expect(r.stderr).toBe('');
    expect(r.stdout.split('\n')).toEqual([
      'via proxy: hello from allowed',
      `other port: 403 agent sandbox: 127.0.0.1:${other} is not among the hosts this sandbox may reach (--allow-host, env.json sandbox.allow_hosts)`,
      'raw: ConnectionRefusedError',
      'no name',
      'tunnel: hello from allowed',
      'tunnel elsewhere: Tunnel connection failed: 403 Forbidden',
      'proxy: http://127.0.0.1:3128',
      '',
    ]);
    expect(hits).toEqual(['allowed /a', 'allowed /c']);
  });

  it('keeps its forwarder outside the limits, and leaves nothing behind at the time limit', async () => {
    const allowed = await serve('limited');
    await using sandbox = await Sandbox.open({ allowHosts: [parseAllowedHost(`127.0.0.1:${allowed}`)] });
    const marker = `egress-loop-${process.pid}`;
    // Three processes are what bwrap and the shell take: the forwarder (a Node, a dozen threads) is not counted in them.
    const r = await sandbox.run({ argv: ['sh', '-c', `while :; do :; done # ${marker}`], workspace: await workspace(), limits: { timeoutMs: 500, pids: 3 } });
    expect(r.timed_out).toBe(true);
    expect(hostProcesses(marker)).toEqual([]);
  });
});

describe('where the sandbox cannot run', () => {
  it('refuses with SANDBOX_UNAVAILABLE, saying what to install, and runs nothing unsandboxed', async () => {
    const saved = process.env['PATH'];
    process.env['PATH'] = '/nonexistent';
    try {
      await Sandbox.open();
      expect.unreachable();
    } catch (err) {
      expect(isAgentError(err) && err.code).toBe('SANDBOX_UNAVAILABLE');
      expect(isAgentError(err) && err.hint).toContain('apt-get install bubblewrap');
    } finally {
      process.env['PATH'] = saved;
    }
  });
});
