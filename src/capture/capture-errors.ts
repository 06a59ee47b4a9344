/**
 * A capture request refused, as the program's SDK expects to read it: an HTTP status and OpenAI's
 * error body (`{"error": {"message", "type", "param", "code"}}`), which the SDKs raise as their
 * own typed errors (a 401 as an authentication error, a 404 as not found, a 400 as bad request).
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

  /** OpenAI's error body. */
  body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.status === 401 ? 'invalid_api_key' : this.type === 'model_not_found' ? 'model_not_found' : null } };
  }
}
