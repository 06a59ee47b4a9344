/**
 * What the capture endpoint adds to an agent program's model calls. A fake vLLM server in one child
 * process answers at once; the programs are clients in another (each a conversation that grows by
 * a tool result per turn, as a tool loop's does), 1, 64 and 256 of them at once, 8 turns each. This
 * process is the capture endpoint alone, so its CPU is what a proxied turn costs us (HTTP in and
 * out, the request's translation, the segment's extension, the token-mode completion); beside it,
 * the `llm:` policy's path (TokenChat.turn in process, the same conversations) at the same
 * concurrency. Added latency: a turn's p50/p99 through the endpoint minus the `llm:` path's.
 * Goals: ≤ 2 ms CPU per proxied turn, ≤ 1 ms p50 added, 256 programs without an error.
 */
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import { listen } from '../src/server/listen.js';
import { ChatCapture } from '../src/capture/chat-capture.js';
import { CaptureServer } from '../src/capture/capture-server.js';
import { TokenChat } from '../src/llm/token-chat.js';
import type { ChatMessage } from '../src/llm/client.js';
import { target } from './lib/targets.js';

const TURNS = 8;
const PARAMETERS = { type: 'object' as const, properties: { key: { type: 'string' } }, required: ['key'] };
const TOOLS = [{ type: 'function' as const, function: { name: 'lookup_code', description: 'The code behind a key.', parameters: PARAMETERS } }];
const FLOOR_ANSWER = JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'lookup_code', arguments: '{"key":"amber-fox"}' } }] }, finish_reason: 'tool_calls' }] });
const CALL = '<tool_call>\n{"name": "lookup_code", "arguments": {"key": "amber-fox"}}\n</tool_call>';

type Stats = { p50: number; p99: number };
const stats = (xs: number[]): Stats => {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: s[Math.floor(s.length * 0.5)] ?? NaN, p99: s[Math.min(s.length - 1, Math.floor(s.length * 0.99))] ?? NaN };
};

if (process.argv[2] === '--server') {
  const { startFakeVllmServer } = await import('../src/llm/fake-vllm-server.js');
  const server = await startFakeVllmServer({ reply: () => CALL, maxModelLen: 1 << 20 });
  process.send?.(server.url);
  process.on('disconnect', () => void server[Symbol.asyncDispose]().then(() => process.exit(0)));
} else if (process.argv[2] === '--clients') {
  // The programs: each token one conversation of TURNS model calls, all at once; one warm process for every round.
  process.on('message', (m) => {
    const { url, model, tokens } = m as { url: string; model: string; tokens: string[] };
    const latencies: number[] = [];
    let errors = 0;
    const program = async (token: string): Promise<void> => {
      const messages: object[] = [{ role: 'user', content: "What is the code behind the key 'amber-fox'?" }];
      for (let turn = 0; turn < TURNS; turn++) {
        const t0 = performance.now();
        const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ model, messages, tools: TOOLS }) });
        const answer = (await res.json()) as { choices?: { message: { tool_calls?: { id: string }[] } }[] };
        latencies.push(performance.now() - t0);
        const message = answer.choices?.[0]?.message;
        if (!res.ok || !message) {
          errors++;
          return;
        }
        messages.push(message, { role: 'tool', tool_call_id: message.tool_calls?.[0]?.id ?? '', content: '{"key":"amber-fox","code":"Q9N4"}' });
      }
    };
    void Promise.all(tokens.map(program)).then(() => process.send?.({ latencies, errors }));
  });
  process.on('disconnect', () => process.exit(0));
} else {
  const server = await new Promise<{ url: string; stop: () => void }>((resolve) => {
    const child = fork(import.meta.filename, ['--server'], { execArgv: ['--import', 'tsx'] });
    child.once('message', (url) => resolve({ url: String(url), stop: () => child.disconnect() }));
  });
  const chat = await TokenChat.open({ baseURL: server.url, model: 'fake-model', sampling: { temperature: 1, top_p: 1, max_tokens: 64 }, seed: 1 });
  await using capture = await CaptureServer.start();
  const clients = fork(import.meta.filename, ['--clients'], { execArgv: ['--import', 'tsx'] });

  /** The llm: policy's path: TokenChat.turn in this process, `n` conversations at once. */
  const direct = async (n: number, offset: number): Promise<{ cpuMs: number; latencies: number[] }> => {
    const latencies: number[] = [];
    const cpu0 = process.cpuUsage();
    await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const episode = offset + i;
        const messages: ChatMessage[] = [{ role: 'user', content: "What is the code behind the key 'amber-fox'?" }];
        for (let turn = 0; turn < TURNS; turn++) {
          const t0 = performance.now();
          const r = await chat.turn(episode, { messages, tools: [{ name: 'lookup_code', description: 'The code behind a key.', parameters: PARAMETERS }] });
          latencies.push(performance.now() - t0);
          messages.push({ role: 'assistant', content: r.text }, { role: 'tool', content: '{"key":"amber-fox","code":"Q9N4"}', toolCallId: r.toolCalls[0]?.id ?? '' });
        }
        chat.end(episode);
      }),
    );
    const cpu = process.cpuUsage(cpu0);
    return { cpuMs: (cpu.user + cpu.system) / 1000, latencies };
  };

  /** Through the endpoint: `n` programs at once in the clients' process. */
  const proxied = async (n: number): Promise<{ cpuMs: number; latencies: number[]; errors: number }> => {
    const controller = new AbortController();
    const endpoints = Array.from({ length: n }, (_, i) => capture.open({ chat: new ChatCapture({ kind: 'tokens', chat }, 100_000 + i, { report: () => undefined }), tools: { name: 'bench', list: () => [], call: () => Promise.reject(new Error('no tools in this bench')) }, signal: controller.signal }));
    const cpu0 = process.cpuUsage();
    const done = new Promise<{ latencies: number[]; errors: number }>((resolve) => clients.once('message', (m) => resolve(m as { latencies: number[]; errors: number })));
    clients.send({ url: capture.url, model: chat.server.model, tokens: endpoints.map((e) => e.token) });
    const result = await done;
    const cpu = process.cpuUsage(cpu0);
    for (const e of endpoints) e.close();
    controller.abort();
    return { cpuMs: (cpu.user + cpu.system) / 1000, ...result };
  };

  /** The floor: the same requests to a bare HTTP server in this process that answers a fixed tool call at once (one loopback hop, nothing of ours). */
  const floorServer = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(FLOOR_ANSWER) }).end(FLOOR_ANSWER));
  });
  const floorUrl = `http://127.0.0.1:${await listen(floorServer, '127.0.0.1', 0)}`;
  const floor = async (n: number): Promise<number[]> => {
    const done = new Promise<{ latencies: number[] }>((resolve) => clients.once('message', (m) => resolve(m as { latencies: number[] })));
    clients.send({ url: floorUrl, model: 'floor', tokens: Array.from({ length: n }, (_, i) => `floor-${i}`) });
    return (await done).latencies;
  };

  // Warm both paths (JIT, connections) before measuring.
  for (let i = 0; i < 3; i++) {
    await direct(16, 1_000 * i);
    await proxied(16);
    await floor(16);
  }
  console.log(`Agent programs' model calls through the capture endpoint (token mode, a fake vLLM answering at once, ${TURNS} turns per program):`);
  for (const n of [1, 64, 256]) {
    // Rounds enough for 512 turns a level (a one-program round is 8 samples: too few for a p50).
    const rounds = Math.ceil(512 / (n * TURNS));
    const a = { cpuMs: 0, latencies: [] as number[] };
    const b = { cpuMs: 0, latencies: [] as number[], errors: 0 };
    const hop: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const x = await direct(n, 10_000 + r * n);
      const y = await proxied(n);
      a.cpuMs += x.cpuMs;
      a.latencies.push(...x.latencies);
      b.cpuMs += y.cpuMs;
      b.latencies.push(...y.latencies);
      b.errors += y.errors;
      if (n === 1) hop.push(...(await floor(n)));
    }
    const turns = rounds * n * TURNS;
    const [da, db] = [stats(a.latencies), stats(b.latencies)];
    const cpuPerTurn = b.cpuMs / turns;
    const added = db.p50 - da.p50;
    const line = `  ${String(n).padStart(3)} at once: CPU per turn ${cpuPerTurn.toFixed(2)} ms proxied vs ${(a.cpuMs / turns).toFixed(2)} ms on the llm: path; latency p50 ${db.p50.toFixed(2)} / p99 ${db.p99.toFixed(2)} ms vs ${da.p50.toFixed(2)} / ${da.p99.toFixed(2)} ms (added p50 ${added.toFixed(2)} ms); ${b.errors} error(s)`;
    console.log(line);
    if (n === 1) console.log(`    of which the loopback hop itself (a bare server answering at once): p50 ${stats(hop).p50.toFixed(2)} ms`);
    if (n === 1) console.log(`    ${target('capture: added latency p50, one program', added, 'ms', { atMost: 1 })}`);
    if (n === 64) console.log(`    ${target('capture: CPU per proxied turn, 64 programs', cpuPerTurn, 'ms', { atMost: 2 })}`);
    if (n === 256) console.log(`    ${target('capture: errors with 256 programs', b.errors, '', { atMost: 0 })}`);
  }
  clients.disconnect();
  floorServer.close();
  server.stop();
}
