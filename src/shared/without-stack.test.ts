import { describe, expect, it } from 'vitest';
import { AgentError } from './errors.js';
import { withoutStack } from './without-stack.js';

describe('withoutStack', () => {
  it('makes an error with no frames in its stack, and leaves the stack limit as it was, even when making it throws', () => {
    const limit = Error.stackTraceLimit;
    const e = withoutStack(() => new AgentError('TOOL_CANCELLED', 'episode over'));
    expect(e).toMatchObject({ code: 'TOOL_CANCELLED', message: 'episode over' });
    expect(e.stack).not.toMatch(/\n\s+at /);
    expect(new Error('with').stack).toMatch(/\n\s+at /);
    expect(() =>
      withoutStack(() => {
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(Error.stackTraceLimit).toBe(limit);
  });
});
