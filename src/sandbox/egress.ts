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
import { connect, type Socket } from 'node:net';
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
  readonly #server: Server;
  readonly #dir: string;
  readonly #open = new Set<Socket>();

  private constructor(server: Server, dir: string) {
    this.#server = server;
    this.#dir = dir;
    this.socketPath = path.join(dir, 'egress.sock');
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

/**
 * The forwarder, run by this Node in the sandbox's network namespace: listens on 127.0.0.1:PORT,
 * relays each connection to the proxy's socket, starts the rest of the command line, and exits as
 * it exits (128 + the signal that ended it, as a shell reports one).
 */
export const FORWARDER = `
const net = require('net');
const { spawn } = require('child_process');
const { signals } = require('os').constants;
const [socket, port, ...command] = process.argv.slice(1);
const server = net.createServer((c) => {
  const u = net.connect(socket);
  c.on('error', () => u.destroy());
  u.on('error', () => c.destroy());
  c.pipe(u);
  u.pipe(c);
});
server.on('error', (e) => { process.stderr.write('sandbox egress: ' + e.message + '\\n'); process.exit(125); });
server.listen(Number(port), '127.0.0.1', () => {
  const child = spawn(command[0], command.slice(1), { stdio: 'inherit' });
  child.on('error', (e) => { process.stderr.write('sandbox egress: ' + e.message + '\\n'); process.exit(127); });
  child.on('exit', (code, signal) => process.exit(signal ? 128 + (signals[signal] || 0) : code));
});
`;

/** The command line that runs `inner` in a new network namespace (loopback up) with the forwarder in front: root makes it directly, anyone else in a user namespace of their own. */
export function egressPrefix(socketPath: string): string[] {
  const userns = process.getuid?.() === 0 ? [] : ['--map-root-user'];
  return ['unshare', '--net', ...userns, '--', '/bin/sh', '-c', 'ip link set lo up && exec "$@"', 'egress', process.execPath, '-e', FORWARDER, socketPath, String(EGRESS_PORT)];
}

/** What the sandboxed command is told: every proxy variable the common clients read. */
export const EGRESS_ENV: Readonly<Record<string, string>> = Object.fromEntries(['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'].map((k) => [k, `http://127.0.0.1:${EGRESS_PORT}`]));
