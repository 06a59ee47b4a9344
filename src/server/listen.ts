/**
 * Starting a server, the same way for each one the toolkit runs: a port taken or an address this
 * machine does not have is a usage error that says what to do, and a client reaches a wildcard
 * bind on loopback.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AgentError } from '../shared/errors.js';
import { isWildcard } from './http-guard.js';

/** Listens on `host:port` (0: any free port) and resolves with the port it got. */
export function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new AgentError('BAD_USAGE', `cannot listen on ${host}:${port}: ${err.code ?? err.message}`, {
          hint: err.code === 'EADDRINUSE' ? 'Another process uses that port: pick another, or 0 for any free one.' : err.code === 'EADDRNOTAVAIL' ? `${host} is not an address of this machine.` : 'Pick a port between 1024 and 65535, or 0 for any free one.',
        }),
      ),
    );
    server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
  });
}

/** `http://<host>:<port>` as a client here reaches it (a wildcard bind on 127.0.0.1, IPv6 in brackets). */
export function baseUrl(host: string, port: number): string {
  const h = isWildcard(host) ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${h}:${port}`;
}
