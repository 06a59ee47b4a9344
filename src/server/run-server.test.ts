/** The run's local server streams its events (server-sent events) and progress, for a console or a web view to attach. */
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { randomPolicy, Run, type Policy } from '../index.js';
import { Emitter } from '../shared/emitter.js';
import { RunServer } from './run-server.js';

const TOKEN = 'a-test-token-of-enough-length';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** Read an event stream until `enough` says so (or it ends); returns the frames as {id, event, data}. */
async function frames(url: string, headers: Record<string, string>, enough: (f: { id: number; event: string }[]) => boolean, onOpen?: () => void): Promise<{ id: number; event: string; data: { type: string } }[]> {
  const controller = new AbortController();
  const res = await fetch(url, { headers, signal: controller.signal });
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  onOpen?.();
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  const parsed: { id: number; event: string; data: { type: string } }[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    const blocks = text.split('\n\n');
    text = blocks.pop() ?? '';
    for (const b of blocks) {
      const id = /^id: (\d+)$/m.exec(b)?.[1];
      const event = /^event: (.+)$/m.exec(b)?.[1];
      const data = /^data: (.+)$/m.exec(b)?.[1];
      if (id && event && data) parsed.push({ id: Number(id), event, data: JSON.parse(data) as { type: string } });
    }
    if (enough(parsed)) break;
  }
  controller.abort();
  return parsed;
}

describe('GET /events and /progress', () => {
  it('replays the run so far, then streams it live; Last-Event-ID resumes after a disconnect', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    // The run waits after its third step until the test has looked.
    const policy: Policy = async (obs, ctx) => {
      if (obs.step === 3) await held;
      return randomPolicy(obs, ctx);
    };
    const out = await mkdtemp(path.join(os.tmpdir(), 'sse-'));
    dirs.push(out);
    const run = await Run.prepare({ env: 'fixtures/weather', episodes: 1, maxSteps: 5, out, port: 0, policy, toolOptions: { latency_scale: 0.01 } });
    const started = new Promise<void>((r) => run.events.on('trace_settled', (e) => e.step === 3 && r()));
    const done = run.execute();
    await started;
    const base = `http://127.0.0.1:${run.port}`;
    const auth = { authorization: `Bearer ${run.server?.token ?? ''}` };
    // The URL and token, for the owner only, while the server is up.
    const serverFile = path.join(run.dir as string, 'server.json');
    expect((await stat(serverFile)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(serverFile, 'utf8'))).toEqual({ url: base, token: run.server?.token, pid: process.pid });
    const first = await frames(`${base}/events`, auth, (f) => f.filter((x) => x.event === 'trace_settled').length >= 3);
    expect(first[0]).toMatchObject({ id: 1, event: 'run_started' });
    expect(first.map((f) => f.id)).toEqual(first.map((_, i) => i + 1));
    expect(first.every((f) => f.data.type === f.event)).toBe(true);
    const resumed = await frames(`${base}/events`, { ...auth, 'last-event-id': '5' }, (f) => f.length >= 2);
    expect(resumed[0]?.id).toBe(6);
    const progress = (await (await fetch(`${base}/progress`, { headers: auth })).json()) as { steps: number; episodes_total: number };
    expect(progress).toMatchObject({ steps: 3, episodes_total: 1 });
    // Live: what happens after connecting arrives too. The run goes on only once the stream is open:
    // released sooner, a loaded machine may finish the run (and close its server) before the request lands.
    const live = frames(`${base}/events?since=${first.at(-1)?.id ?? 0}`, auth, (f) => f.some((x) => x.event === 'run_finished'), release);
    expect((await live).map((f) => f.event)).toContain('run_finished');
    await done;
    await expect(stat(serverFile)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('keeps only the last events for late joiners (a ring), in order', async () => {
    const events = new Emitter<{ type: string; n: number }>();
    await using server = await RunServer.start({ port: 0, runId: 'ring', rewards: undefined as never, events, replay: 5, token: TOKEN });
    for (let n = 1; n <= 12; n++) events.emit({ type: 'tick', n });
    const all = await frames(`http://127.0.0.1:${server.port}/events`, AUTH, (f) => f.length >= 5);
    expect(all.map((f) => f.id)).toEqual([8, 9, 10, 11, 12]);
    const after = await frames(`http://127.0.0.1:${server.port}/events?since=10`, AUTH, (f) => f.length >= 2);
    expect(after.map((f) => [f.id, (f.data as unknown as { n: number }).n])).toEqual([
      [11, 11],
      [12, 12],
    ]);
  });
});
