import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentEnv, defineEnv, type JsonObject } from '../index.js';

/** A small evaluator service: scores a step from what it was sent; answers 503 to the first call when told to. */
async function evaluator(answer: (body: JsonObject, req: IncomingMessage, call: number) => { status: number; body: string }): Promise<{ url: string; calls: JsonObject[]; server: Server }> {
  const calls: JsonObject[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(text) as JsonObject;
      calls.push({ ...body, authorization: req.headers.authorization ?? null });
      const { status, body: out } = answer(body, req, calls.length);
      res.writeHead(status, { 'content-type': 'application/json' }).end(out);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/score`, calls, server };
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  delete process.env['QUALITY_TOKEN'];
});

async function envWith(service: JsonObject): Promise<AgentEnv> {
  const def = await defineEnv({
    state: { type: 'object', properties: { city: { type: 'string' } } },
    actions: [{ name: 'visit', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }],
    rewards: { type: 'object', properties: { quality: { type: 'number', minimum: 0, maximum: 1, delay_ms: 100 } } },
    reward_sources: { quality: { service } },
  });
  return AgentEnv.create(def, { handlers: { visit: async ({ city }) => ({ observation: { city: city as string }, patch: [{ op: 'add', path: '/city', value: city as string }] }) } });
}

describe('a reward source served over HTTP', () => {
  it('POSTs each step to the service with its token, retries a 503, and lands the answer on the step', async () => {
    const svc = await evaluator((body, _req, call) => (call === 1 ? { status: 503, body: 'busy' } : { status: 200, body: JSON.stringify({ value: (body['params'] as JsonObject)['city'] === 'Paris' ? 1 : 0.2 }) }));
    servers.push(svc.server);
    process.env['QUALITY_TOKEN'] = 'secret-token';
    await using env = await envWith({ url: svc.url, token_env: 'QUALITY_TOKEN', retry: { max_attempts: 3, initial_delay_ms: 1 } });
    const agent = env.createInstance();
    await agent.reset({});
    const paris = (await agent.step({ name: 'visit', params: { city: 'Paris' } })).info.trace_id;
    const rome = (await agent.step({ name: 'visit', params: { city: 'Rome' } })).info.trace_id;
    await env.rewards.settle(AbortSignal.timeout(10_000));
    expect(env.rewards.entries(paris)?.['quality']).toMatchObject({ status: 'arrived', value: 1 });
    expect(env.rewards.entries(rome)?.['quality']).toMatchObject({ status: 'arrived', value: 0.2 });
    expect(svc.calls).toHaveLength(3);
    expect(svc.calls[0]).toMatchObject({ source: 'quality', action: 'visit', params: { city: 'Paris' }, state_before: {}, state_after: { city: 'Paris' }, step: 1, trace_id: paris, authorization: 'Bearer secret-token' });
  });

  it('fails only its own value, saying why: an answer outside the schema, a 400 (not retried), a token that is not set', async () => {
    const svc = await evaluator((body) => ((body['params'] as JsonObject)['city'] === 'Paris' ? { status: 200, body: '7' } : { status: 400, body: 'no such city' }));
    servers.push(svc.server);
    await using env = await envWith({ url: svc.url, retry: { max_attempts: 3, initial_delay_ms: 1 } });
    const agent = env.createInstance();
    await agent.reset({});
    const paris = await agent.step({ name: 'visit', params: { city: 'Paris' } });
    const nowhere = await agent.step({ name: 'visit', params: { city: 'Nowhere' } });
    await env.rewards.settle(AbortSignal.timeout(10_000));
    expect(paris.info.status).toBe('resolved');
    expect(env.rewards.entries(paris.info.trace_id)?.['quality']).toMatchObject({ status: 'failed', error: expect.stringContaining('maximum') });
    expect(env.rewards.entries(nowhere.info.trace_id)?.['quality']).toMatchObject({ status: 'failed', error: expect.stringContaining('400') });
    expect(svc.calls).toHaveLength(2);
    await using tokenless = await envWith({ url: svc.url, token_env: 'QUALITY_TOKEN' });
    const other = tokenless.createInstance();
    await other.reset({});
    const step = await other.step({ name: 'visit', params: { city: 'Paris' } });
    await tokenless.rewards.settle(AbortSignal.timeout(10_000));
    expect(tokenless.rewards.entries(step.info.trace_id)?.['quality']).toMatchObject({ status: 'failed', error: expect.stringContaining('$QUALITY_TOKEN') });
  });

  it('refuses a binding without a URL, naming the field', async () => {
    await expect(envWith({ token_env: 'X' } as JsonObject)).rejects.toMatchObject({ issues: [expect.objectContaining({ pointer: '/reward_sources/quality/service/url', message: expect.stringContaining('required') })] });
  });
});
