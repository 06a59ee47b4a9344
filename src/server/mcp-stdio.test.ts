import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LineTransport } from './mcp-stdio.js';

/** An output whose reader reads only when told. */
class StalledOutput extends Writable {
  readonly lines: string[] = [];
  readonly #waiting: (() => void)[] = [];
  constructor() {
    super({ highWaterMark: 64 });
  }
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    this.lines.push(String(chunk));
    this.#waiting.push(done);
  }
  readAll(): void {
    for (const done of this.#waiting.splice(0)) done();
  }
}

const request = (id: number): string => `${JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/list' })}\n`;
const turns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

describe('LineTransport', () => {
  it('reads no more requests while the client does not read its answers, and answers all of them once it does', async () => {
    const input = new PassThrough();
    const output = new StalledOutput();
    const transport = new LineTransport(() => ({ success: true }), { input, output });
    let handled = 0;
    transport.onmessage = (m) => {
      handled++;
      void transport.send({ jsonrpc: '2.0', id: (m as { id: number }).id, result: { tools: [], padding: 'x'.repeat(200) } } as never);
    };
    await transport.start();
    for (let id = 1; id <= 1_000; id++) input.write(request(id));
    await turns(20);
    expect(handled).toBeLessThan(10);
    while (handled < 1_000) {
      output.readAll();
      await turns(2);
    }
    output.readAll();
    expect(output.lines).toHaveLength(1_000);
    await transport.close();
  });

  it('answers a request nested 300,000 deep with its id and the limit, without parsing it', async () => {
    const input = new PassThrough();
    const output = new StalledOutput();
    const transport = new LineTransport(() => ({ success: true }), { input, output });
    const seen: unknown[] = [];
    transport.onmessage = (m) => seen.push(m);
    await transport.start();
    input.write(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"get_weather","arguments":{"city":${'['.repeat(300_000)}${']'.repeat(300_000)}}}}\n`);
    input.write(request(9));
    await turns(5);
    output.readAll();
    await turns(5);
    expect(JSON.parse(output.lines[0] as string)).toMatchObject({ id: 8, error: { code: -32600, message: expect.stringContaining('deeper than 512 levels') } });
    expect(seen).toEqual([{ jsonrpc: '2.0', id: 9, method: 'tools/list' }]);
    await transport.close();
  });
});
