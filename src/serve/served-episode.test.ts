import { describe, expect, it } from 'vitest';
import { AgentEnv } from '../env/agent-env.js';
import { AgentError } from '../shared/errors.js';
import type { JsonValue } from '../shared/json.js';
import type { EpisodeControl } from '../run/episode-runner.js';
import { ServedEpisode } from './served-episode.js';

/** A served episode over a real weather instance, whose run says when its steps are durable. */
async function episode(committed: (signal: AbortSignal) => Promise<void>): Promise<{ served: ServedEpisode; [Symbol.asyncDispose](): Promise<void> }> {
  const env = await AgentEnv.open('fixtures/weather', { toolOptions: { latency_scale: 0 }, seed: 1 });
  const agent = env.createInstance({ id: 'ep-0' });
  await agent.reset(env.definition.initialStates[0] as JsonValue);
  const served = new ServedEpisode(0, { episodeId: 'ep-test' });
  const control: EpisodeControl = { agent, episode: 0, initialStateId: 'initial-0', maxSteps: 10, twoSided: false, steps: () => 0, dispatch: (action) => agent.dispatch(action), committed, reportLlmCall: () => undefined };
  void served.drive(control, new AbortController().signal);
  return { served, [Symbol.asyncDispose]: () => env[Symbol.asyncDispose]() };
}

const paris = { name: 'get_weather', params: { city: 'Paris' } };

describe('ServedEpisode', () => {
  it('answers a step only once the run says it is durable', async () => {
    let durable!: () => void;
    const waiting = new Promise<void>((r) => (durable = r));
    let asked = 0;
    await using e = await episode(() => {
      asked++;
      return waiting;
    });
    let answered = false;
    const step = e.served.step(paris, new AbortController().signal).then((envelope) => {
      answered = true;
      return envelope;
    });
    await expect.poll(() => asked).toBe(1);
    // The call has settled (the env committed it); the answer waits for the journal.
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(answered).toBe(false);
    durable();
    expect(await step).toMatchObject({ done: false, info: { status: 'resolved' } });
  });

  it('serializes its envelopes as JSON.stringify would, building each set of enabled actions once', async () => {
    await using e = await episode(() => Promise.resolve());
    const reset = e.served.resetEnvelope();
    const step = await e.served.step(paris, new AbortController().signal);
    expect(step.observation.actions).toBe(reset.observation.actions);
    for (const envelope of [reset, step]) expect(JSON.parse(e.served.tools.envelopeJson(envelope))).toEqual(JSON.parse(JSON.stringify(envelope)));
    e.served.end('client_closed');
    // Done: nothing offered, the empty list serialized like any other.
    expect(JSON.parse(e.served.tools.envelopeJson(e.served.resetEnvelope()))).toMatchObject({ observation: { actions: [] } });
  });

  it('answers with the store failure, not the step, when it could not be made durable', async () => {
    await using e = await episode(() => Promise.reject(new AgentError('STORE_UNAVAILABLE', 'writing the journal failed')));
    await expect(e.served.step(paris, new AbortController().signal)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });
});
