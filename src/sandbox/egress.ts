/**
 * The only way out of a sandbox that lists hosts it may reach (`--allow-host`, env.json
 * `sandbox.allow_hosts`). The sandbox keeps a network namespace of its own, with no route
 * anywhere; in it, a forwarder listens on 127.0.0.1:3128 and relays each connection over a Unix
 * socket to this proxy, on the host, which opens the connection only to a listed host: HTTPS by
 * `CONNECT host:port`, plain HTTP by absolute URL (what `HTTP_PROXY` and `HTTPS_PROXY`, set in the
 * sandbox, make pip, curl, requests, httpx and Node's fetch do). Anything else — another host, a
 * raw socket, a name lookup (the sandbox has no resolver) — goes nowhere.
 *
 * The forwarder runs outside the sandbox's limits (its memory, processes and CPU are not the
 * command's), in the sandbox's network namespace only: a byte relay, it reads nothing it is sent.
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** Where the forwarder listens inside the sandbox (its own loopback: no other process of the host is there). */
export const EGRESS_PORT = 3128;

/** A host a sandbox may reach: a name (`pypi.org`), every name under a domain (`*.pythonhosted.org`) or an address; on its port, or on 80 and 443. */
export interface AllowedHost {
  readonly host: string;
  readonly port?: number;
}

/** `host`, `*.domain`, `host:port`, `[v6]:port`: a bad one is an Error saying what is wrong. */
export function parseAllowedHost(spec: string): AllowedHost {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:\s/]+)(?::(\d{1,5}))?$/.exec(spec.trim());
  const host = m?.[1]?.toLowerCase();
  const port = m?.[2] === undefined ? undefined : Number(m[2]);
  if (!host || (port !== undefined && (port < 1 || port > 65_535)) || !/^(\*\.)?[a-z0-9.[\]:_-]+$/.test(host) || host.slice(2).includes('*')) {
    throw new Error(`'${spec}' is not a host: write a name (pypi.org), *.domain, an address, and optionally :port`);
  }
  return { host, ...(port !== undefined ? { port } : {}) };
}

export function hostAllowed(allowed: readonly AllowedHost[], host: string, port: number): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return allowed.some((a) => {
    const portOk = a.port === undefined ? port === 80 || port === 443 : a.port === port;
    const nameOk = a.host.startsWith('*.') ? name.endsWith(a.host.slice(1)) : name === a.host || `[${name}]` === a.host;
    return portOk && nameOk;
  });
}

/** The proxy on the host: a Unix socket the sandboxes' forwarders connect to. */
export class EgressProxy implements AsyncDisposable {
  readonly socketPath: string;
  /** The forwarder's route to it: 127.0.0.1:3128 inside. */
  readonly route: EgressRoute;
  readonly #server: Server;
  readonly #dir: string;
  readonly #open = new Set<Socket>();

  private constructor(server: Server, dir: string) {
    this.#server = server;
    this.#dir = dir;
    this.socketPath = path.join(dir, 'egress.sock');
    this.route = { port: EGRESS_PORT, socket: this.socketPath };
  }

  static async open(allowed: readonly AllowedHost[]): Promise<EgressProxy> {
    // A folder of its own keeps the socket's path short (Unix sockets allow ~108 bytes) and private.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agent-egress-'));
    const server = createServer((req, res) => forwardHttp(allowed, req, res));
    const proxy = new EgressProxy(server, dir);
    server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => tunnel(allowed, req, client, head));
    server.on('connection', (s: Socket) => {
      proxy.#open.add(s);
      s.once('close', () => proxy.#open.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(proxy.socketPath, () => resolve());
    });
    return proxy;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const s of this.#open) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    await rm(this.#dir, { recursive: true, force: true });
  }
}

const refusal = (target: string): string => `agent sandbox: ${target} is not among the hosts this sandbox may reach (--allow-host, env.json sandbox.allow_hosts)\n`;

/** `CONNECT host:port` (HTTPS, or any TCP a client tunnels): opened only to a listed host. */
function tunnel(allowed: readonly AllowedHost[], req: IncomingMessage, client: Socket, head: Buffer): void {
  client.on('error', () => undefined);
  const m = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(req.url ?? '');
  const host = m?.[1]?.replace(/^\[|\]$/g, '') ?? '';
  const port = Number(m?.[2]);
  if (!m || !hostAllowed(allowed, host, port)) {
    const body = refusal(req.url ?? '?');
    client.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    return;
  }
  const upstream = connect(port, host, () => {
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  upstream.on('error', (err) => {
    if (client.writable && upstream.bytesRead === 0) client.end(`HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nagent sandbox: ${host}:${port}: ${err.message}\n`);
    else client.destroy();
  });
  client.on('close', () => upstream.destroy());
}

/** A plain-HTTP request by absolute URL: forwarded only to a listed host. */
function forwardHttp(allowed: readonly AllowedHost[], req: IncomingMessage, res: ServerResponse): void {
  let url: URL | undefined;
  try {
    url = new URL(req.url ?? '');
  } catch {
    url = undefined;
  }
  const port = url ? Number(url.port || 80) : 0;
  if (!url || url.protocol !== 'http:' || !hostAllowed(allowed, url.hostname.replace(/^\[|\]$/g, ''), port)) {
    res.writeHead(url ? 403 : 400, { 'content-type': 'text/plain' }).end(url ? refusal(`${url.hostname}:${port}`) : 'agent sandbox: send requests through this proxy by absolute URL\n');
    return;
  }
  const headers = { ...req.headers };
  delete headers['proxy-connection'];
  delete headers['proxy-authorization'];
  const upstream = request({ host: url.hostname.replace(/^\[|\]$/g, ''), port, method: req.method, path: `${url.pathname}${url.search}`, headers }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  upstream.on('error', (err) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end(`agent sandbox: ${url.host}: ${err.message}\n`);
    else res.destroy();
  });
  req.pipe(upstream);
}

/** A port the forwarder listens on inside the sandbox, and the Unix socket it relays each connection to. */
export interface EgressRoute {
  readonly port: number;
  readonly socket: string;
}

/**
 * A port of the host's loopback, reachable from inside a sandbox at the same port (an agent
 * program's model endpoint): each connection the forwarder relays over this socket is piped to
 * 127.0.0.1:port. Only that port: the sandbox reaches nothing else of the host.
 */
export class LoopbackRelay implements AsyncDisposable {
  readonly route: EgressRoute;
  readonly #server: NetServer;
  readonly #dir: string;
  /** Both ends of every relayed connection, destroyed at dispose. */
  readonly #open: Set<Socket>;

  private constructor(server: NetServer, dir: string, route: EgressRoute, open: Set<Socket>) {
    this.#server = server;
    this.#dir = dir;
    this.route = route;
    this.#open = open;
  }

  static async open(port: number): Promise<LoopbackRelay> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agent-relay-'));
    const route = { port, socket: path.join(dir, `${port}.sock`) };
    const open = new Set<Socket>();
    const server = createNetServer((inside) => {
      const host = connect(port, '127.0.0.1');
      for (const s of [inside, host]) {
        open.add(s);
        s.once('close', () => open.delete(s));
      }
      inside.on('error', () => host.destroy());
      host.on('error', () => inside.destroy());
      inside.pipe(host);
      host.pipe(inside);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(route.socket, () => resolve());
    });
    return new LoopbackRelay(server, dir, route, open);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const s of this.#open) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    await rm(this.#dir, { recursive: true, force: true });
  }
}

/**
 * The forwarder, run by this Node in the sandbox's network namespace: for each route, listens on
 * 127.0.0.1:port and relays each connection to its socket; then starts the rest of the command
 * line, and exits as it exits (128 + the signal that ended it, as a shell reports one).
 */
export const FORWARDER = `
const net = require('net');
const { spawn } = require('child_process');
const { signals } = require('os').constants;
const args = process.argv.slice(1);
const n = Number(args[0]);
const routes = [];
for (let i = 0; i < n; i++) routes.push({ port: Number(args[1 + 2 * i]), socket: args[2 + 2 * i] });
const command = args.slice(1 + 2 * n);
const fail = (code) => (e) => { process.stderr.write('sandbox egress: ' + e.message + '\\n'); process.exit(code); };
let listening = 0;
for (const { port, socket } of routes) {
  const server = net.createServer((c) => {
    const u = net.connect(socket);
    c.on('error', () => u.destroy());
    u.on('error', () => c.destroy());
    c.pipe(u);
    u.pipe(c);
  });
  server.on('error', fail(125));
  server.listen(port, '127.0.0.1', () => {
    if (++listening < routes.length) return;
    const child = spawn(command[0], command.slice(1), { stdio: 'inherit' });
    child.on('error', fail(127));
    child.on('exit', (code, signal) => process.exit(signal ? 128 + (signals[signal] || 0) : code));
  });
}
`;

/** The command line that runs `inner` in a new network namespace (loopback up) with the forwarder in front: root makes it directly, anyone else in a user namespace of their own. */
export function egressPrefix(routes: readonly EgressRoute[]): string[] {
  const userns = process.getuid?.() === 0 ? [] : ['--map-root-user'];
  return ['unshare', '--net', ...userns, '--', '/bin/sh', '-c', 'ip link set lo up && exec "$@"', 'egress', process.execPath, '-e', FORWARDER, String(routes.length), ...routes.flatMap((r) => [String(r.port), r.socket])];
}

/** What a sandboxed command with a proxy is told: every proxy variable the common clients read. */
export const EGRESS_ENV: Readonly<Record<string, string>> = Object.fromEntries(['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'].map((k) => [k, `http://127.0.0.1:${EGRESS_PORT}`]));
