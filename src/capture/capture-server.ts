/**
 * The capture endpoint: one HTTP server on loopback for a run's agent programs. Each episode's
 * program gets a token of its own (128 random bits) that opens only that episode: its model calls
 * (OpenAI's `/v1/chat/completions`, `/v1/responses` and `/v1/models`, Anthropic's `/v1/messages`, the key sent as OpenAI's `Authorization: Bearer` or
 * Anthropic's `x-api-key`) and its tools over MCP (`/mcp/<token>`, the token in the URL so any MCP
 * client works as configured). A wrong or finished episode's token is a 401 in OpenAI's error
 * shape; request bodies are bounded; the Host and Origin checks are every server's (http-guard.ts).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { guardRequest } from '../server/http-guard.js';
import { baseUrl, listen } from '../server/listen.js';
import { CaptureError } from './capture-errors.js';
import { chatCall, type ChatAnswer, type ChatCapture } from './chat-capture.js';
import { serveMcp, type EpisodeTools } from './episode-mcp.js';
import { writeChatStream } from './chat-stream.js';
import { message, messagesCall, writeMessageStream } from './anthropic-messages.js';
import { outputItems, response, responsesCall, writeResponseStream } from './openai-responses.js';
import type { JsonValue } from '../shared/json.js';

/** What a token opens: the episode's model calls and tools, while it runs. */
export interface CapturedEpisode {
  readonly chat: ChatCapture;
  readonly tools: EpisodeTools;
  /** Aborts when the episode ends: requests in flight are cancelled. */
  readonly signal: AbortSignal;
}

export interface CaptureServerOptions {
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Default 0 (any free port). */
  readonly port?: number;
  /** The largest request body taken (default 8 MiB: a long agent history). */
  readonly maxBodyBytes?: number;
}

/** An episode's endpoint, as its program's environment names it. */
export interface EpisodeEndpoint {
  readonly token: string;
  /** `OPENAI_BASE_URL`: `<url>/v1`. */
  readonly openaiBaseUrl: string;
  /** `ANTHROPIC_BASE_URL`: the server's root. */
  readonly anthropicBaseUrl: string;
  /** `AGENT_MCP_URL`. */
  readonly mcpUrl: string;
  /** The token opens nothing from now on. */
  close(): void;
}

export class CaptureServer implements AsyncDisposable {
  readonly url: string;
  readonly #server: Server;
  readonly #host: string;
  readonly #maxBody: number;
  readonly #episodes = new Map<string, CapturedEpisode>();
  /** Each open episode's Responses items by response id (`previous_response_id`). */
  readonly #responses = new Map<string, Map<string, readonly JsonValue[]>>();

  private constructor(server: Server, host: string, port: number, maxBody: number) {
    this.#server = server;
    this.#host = host;
    this.url = baseUrl(host, port);
    this.#maxBody = maxBody;
  }

  static async start(options: CaptureServerOptions = {}): Promise<CaptureServer> {
    const host = options.host ?? '127.0.0.1';
    const server = createServer();
    const port = await listen(server, host, options.port ?? 0);
    const capture = new CaptureServer(server, host, port, options.maxBodyBytes ?? 8 * 1024 * 1024);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => void capture.handle(req, res));
    return capture;
  }

  /** Opens `episode` under a fresh token. */
  open(episode: CapturedEpisode): EpisodeEndpoint {
    const token = randomBytes(16).toString('hex');
    this.#episodes.set(token, episode);
    this.#responses.set(token, new Map());
    const close = (): void => {
      this.#episodes.delete(token);
      this.#responses.delete(token);
    };
    return { token, openaiBaseUrl: `${this.url}/v1`, anthropicBaseUrl: this.url, mcpUrl: `${this.url}/mcp/${token}`, close };
  }

  /** Episodes open now. */
  get open_episodes(): number {
    return this.#episodes.size;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#episodes.clear();
    this.#responses.clear();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://capture');
    const refusal = guardRequest(req, url.pathname, { host: this.#host });
    try {
      if (refusal) throw new CaptureError(refusal.status, 'invalid_request_error', refusal.error);
      if (url.pathname.startsWith('/mcp/')) {
        const episode = this.#episode(url.pathname.slice('/mcp/'.length));
        return await serveMcp(episode.tools, req, res, req.method === 'POST' ? await this.#body(req) : undefined);
      }
      const key = keyOf(req);
      const episode = this.#episode(key);
      if (req.method === 'GET' && url.pathname === '/v1/models') return json(res, 200, { object: 'list', data: [{ id: episode.chat.model, object: 'model', created: 0, owned_by: 'agentic-rl-toolkit' }] });
      if (req.method === 'POST' && url.pathname === '/v1/chat/completions') {
        const call = chatCall(await this.#body(req));
        const answer = await episode.chat.complete(call, episode.signal);
        return call.stream ? writeChatStream(res, answer, call.includeUsage) : json(res, 200, completion(answer));
      }
      if (req.method === 'POST' && url.pathname === '/v1/messages') {
        const call = messagesCall(await this.#body(req));
        const answer = await episode.chat.complete(call, episode.signal);
        return call.stream ? writeMessageStream(res, answer) : json(res, 200, message(answer));
      }
      if (req.method === 'POST' && url.pathname === '/v1/responses') {
        const kept = this.#responses.get(key as string) as Map<string, readonly JsonValue[]>;
        const call = responsesCall(await this.#body(req), (id) => kept.get(id));
        const answer = await episode.chat.complete(call, episode.signal);
        kept.set(`resp_${answer.id}`, [...call.items, ...outputItems(answer)]);
        return call.stream ? writeResponseStream(res, answer, call) : json(res, 200, response(answer, call));
      }
      throw new CaptureError(404, 'not_found_error', `no route ${req.method ?? ''} ${url.pathname}: this endpoint serves /v1/chat/completions, /v1/responses, /v1/messages, /v1/models and /mcp/<token>`);
    } catch (err) {
      const e = err instanceof CaptureError ? err : new CaptureError(502, 'upstream_error', err instanceof Error ? err.message : String(err));
      if (res.headersSent) return void res.destroy();
      json(res, e.status, e.body(url.pathname === '/v1/messages' ? 'anthropic' : 'openai'));
    }
  }

  #episode(token: string | undefined): CapturedEpisode {
    const episode = token === undefined ? undefined : this.#episodes.get(token);
    if (episode) return episode;
    throw new CaptureError(401, 'invalid_request_error', token === undefined ? 'no API key: send the episode\'s key (OPENAI_API_KEY) as "Authorization: Bearer <key>"' : 'Incorrect API key provided: it opens no running episode (a wrong key, or its episode is over)');
  }

  async #body(req: IncomingMessage): Promise<unknown> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > this.#maxBody) throw new CaptureError(413, 'invalid_request_error', `the request body passes ${this.#maxBody} bytes`);
      chunks.push(chunk);
    }
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    } catch {
      throw new CaptureError(400, 'invalid_request_error', 'the request body is not valid JSON');
    }
  }
}

/** The key a request carries: OpenAI's bearer, or Anthropic's x-api-key. */
function keyOf(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ')) return auth.slice('Bearer '.length).trim();
  const key = req.headers['x-api-key'];
  return typeof key === 'string' ? key : undefined;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** A Chat Completions answer as OpenAI's `chat.completion` object. */
export function completion(a: ChatAnswer): object {
  return {
    id: a.id,
    object: 'chat.completion',
    created: a.created,
    model: a.model,
    choices: [{ index: 0, message: { role: 'assistant', content: a.content, ...(a.toolCalls.length > 0 ? { tool_calls: a.toolCalls } : {}), refusal: null }, logprobs: null, finish_reason: a.finishReason }],
    usage: a.usage,
  };
}
