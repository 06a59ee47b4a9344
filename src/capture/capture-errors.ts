/**
 * A capture request refused, as the program's SDK expects to read it: an HTTP status and the error
 * body of the API it called — OpenAI's `{"error": {"message", "type", "param", "code"}}` or
 * Anthropic's `{"type": "error", "error": {"type", "message"}}` — which the SDKs raise as their own
 * typed errors (a 401 as an authentication error, a 404 as not found, a 400 as bad request).
 */
import type { JsonObject, JsonValue } from '../shared/json.js';

export class CaptureError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = 'CaptureError';
  }

  /** The error body in the shape of the API called. */
  body(api: 'openai' | 'anthropic'): object {
    if (api === 'anthropic') return { type: 'error', error: { type: ANTHROPIC_TYPES[this.status] ?? 'api_error', message: this.message } };
    return { error: { message: this.message, type: this.type, param: this.param, code: this.status === 401 ? 'invalid_api_key' : this.type === 'model_not_found' ? 'model_not_found' : null } };
  }
}

/** Anthropic's error types by status. */
const ANTHROPIC_TYPES: Readonly<Record<number, string>> = { 400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error', 404: 'not_found_error', 413: 'request_too_large', 429: 'rate_limit_error' };

/** A request that cannot be read: a 400 naming the field. */
export function badRequest(message: string, param: string): never {
  throw new CaptureError(400, 'invalid_request_error', message, param);
}

export const isObject = (v: JsonValue | undefined): v is JsonObject => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The text of a message's content: absent, a string, or the text of its parts (of `partTypes`); anything else is a 400 naming `where`. */
export function contentText(content: JsonValue | undefined, where: string, partTypes: readonly string[] = ['text']): string {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((p, i) => (isObject(p) && partTypes.includes(p['type'] as string) && typeof p['text'] === 'string' ? p['text'] : badRequest(`${where}[${i}]: only text parts are supported`, where))).join('');
  }
  return badRequest(`${where} must be a string or an array of text parts`, where);
}
