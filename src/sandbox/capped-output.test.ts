/** A stream kept to its first bytes (a tool's output) or its last (what a failed program said last), the rest counted and marked. */
import { describe, expect, it } from 'vitest';
import { CappedOutput } from './capped-output.js';

const feed = (out: CappedOutput, text: string, chunk: number): CappedOutput => {
  for (let i = 0; i < text.length; i += chunk) out.push(Buffer.from(text.slice(i, i + chunk)));
  return out;
};

describe('a capped stream', () => {
  const text = Array.from({ length: 100 }, (_, i) => `line ${i}\n`).join('');

  it('keeps the first bytes, marking the cut after them', () => {
    const out = feed(new CappedOutput(20), text, 7);
    expect(out.text()).toBe(`${text.slice(0, 20)}\n[… truncated: ${text.length} bytes in all, the first 20 kept]`);
    expect([out.bytes, out.truncated]).toEqual([text.length, true]);
  });

  it('keeps the last bytes, marking the cut before them, whatever the chunks', () => {
    for (const chunk of [1, 7, 64, 1_000]) {
      const out = feed(new CappedOutput(20, 'tail'), text, chunk);
      expect(out.text(), `chunks of ${chunk}`).toBe(`[… truncated: ${text.length} bytes in all, the last 20 kept]\n${text.slice(-20)}`);
    }
  });

  it('keeps a short stream whole and unmarked, either way', () => {
    expect(feed(new CappedOutput(1_000, 'tail'), 'short\n', 2).text()).toBe('short\n');
    expect(feed(new CappedOutput(1_000), 'short\n', 2).truncated).toBe(false);
  });
});
