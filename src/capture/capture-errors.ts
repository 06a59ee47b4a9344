/**
 * A capture request refused, as the program's SDK expects to read it: an HTTP status and the error
 * body of the API it called — OpenAI's `{"error": {"message", "type", "param", "code"}}` or
 * Anthropic's `{"type": "error", "error": {"type", "message"}}` — which the SDKs raise as their own
 * typed errors (a 401 as an authentication error, a 404 as not found, a 400 as bad request).
 */
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
