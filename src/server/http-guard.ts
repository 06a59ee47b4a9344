/**
 * Who may talk to a server the toolkit starts. Every server (the run server, a worker's health
 * endpoint, and those to come) passes each request through `guardRequest` before routing it:
 *
 * - **Host**: a server bound to loopback answers only a `Host` of loopback or `localhost`, so a
 *   web page whose name an attacker re-points at 127.0.0.1 (DNS rebinding) is refused; a server
 *   bound to one address answers that address too; a wildcard bind (`0.0.0.0`, `::`) cannot know
 *   its names, and relies on its token.
 * - **Origin**: a browser request from another origin (`Origin` not this server's, or
 *   `Sec-Fetch-Site: cross-site | same-site`) is refused, so no page the user has open can post
 *   to a server or read from it, whatever the content type (CSRF with `text/plain` included).
 * - **Token**: where the server has one, every route but the open ones needs
 *   `Authorization: Bearer <token>` (compared in constant time).
 * - **Body**: a request with a body must say `application/json` or `application/x-ndjson`: the
 *   content types a browser cannot send cross-origin without asking first.
 *
 * Refusals are values (`Refusal`), answered by the server with their status and message.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

export interface GuardOptions {
  /** The address the server is bound to (`127.0.0.1`, `::1`, `0.0.0.0`, a host's address, …). */
  readonly host: string;
  /** Required on every route but `open` ones, when set. */
  readonly token?: string;
  /** Routes (pathnames) that need no token: health checks an orchestrator probes. */
  readonly open?: ReadonlySet<string>;
  /** Where a client finds the token, said when it sent none or a wrong one. */
  readonly tokenHint?: string;
}

export interface Refusal {
  readonly status: 401 | 403 | 415;
  readonly error: string;
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '::1', '[::1]']);
const BODY_TYPES = new Set(['application/json', 'application/x-ndjson']);

/** A fresh token for a server: 192 random bits, URL-safe. */
export function newToken(): string {
  return randomBytes(24).toString('base64url');
}

export function isLoopback(host: string): boolean {
  return LOOPBACK_NAMES.has(host.toLowerCase()) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]';
}

/** The hostname of a Host header (`127.0.0.1:7070` → `127.0.0.1`, `[::1]:7070` → `[::1]`), lower-cased. */
function hostnameOf(header: string): string {
  const h = header.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.lastIndexOf(':');
  return colon === -1 ? h : h.slice(0, colon);
}

function hostAllowed(header: string | undefined, bound: string): boolean {
  if (isWildcard(bound)) return true;
  // HTTP/1.1 requires Host; a request without one is not a browser's and names nothing to check.
  if (header === undefined) return true;
  const name = hostnameOf(header);
  if (isLoopback(bound)) return isLoopback(name);
  const b = bound.toLowerCase();
  return name === b || (isIP(b) === 6 && name === `[${b}]`);
}

/** The request's origin is this server's own: same scheme-less host and port as the Host header. */
function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    return new URL(origin).host.toLowerCase() === host.trim().toLowerCase();
  } catch {
    return false;
  }
}

function tokenMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (!m) return false;
  const given = Buffer.from(m[1] as string);
  const wanted = Buffer.from(token);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

/** Why a request is refused, or undefined when it may be routed. */
export function guardRequest(req: IncomingMessage, pathname: string, options: GuardOptions): Refusal | undefined {
  const host = req.headers.host;
  if (!hostAllowed(host, options.host)) {
    return { status: 403, error: `Host '${host ?? ''}' is not this server's: connect to ${isLoopback(options.host) ? '127.0.0.1 or localhost' : options.host}` };
  }
  const origin = req.headers.origin;
  const fetchSite = req.headers['sec-fetch-site'];
  if ((origin !== undefined && !sameOrigin(origin, host)) || fetchSite === 'cross-site' || fetchSite === 'same-site') {
    return { status: 403, error: `cross-origin requests are refused (Origin ${origin ?? fetchSite ?? ''}): call this server from a program, not a web page` };
  }
  if (options.token !== undefined && !options.open?.has(pathname) && !tokenMatches(req.headers.authorization, options.token)) {
    return { status: 401, error: `missing or wrong token: send Authorization: Bearer <token>${options.tokenHint ? ` (${options.tokenHint})` : ''}` };
  }
  const hasBody = (req.headers['content-length'] ?? '0') !== '0' || req.headers['transfer-encoding'] !== undefined;
  if (hasBody) {
    const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
    if (!BODY_TYPES.has(type)) return { status: 415, error: `content-type '${type}' is refused: send application/json or application/x-ndjson` };
  }
  return undefined;
}
