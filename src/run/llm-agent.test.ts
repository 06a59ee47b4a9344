import { describe, expect, it } from 'vitest';
import type { ChatRequest, ChatResponse, LlmClient } from '../llm/client.js';
import { llmAgent } from './llm-agent.js';
import type { Observation, PolicyContext } from './policy.js';
import { Rng } from '../shared/rng.js';

/** A model that always answers in words: each episode is one turn. */
const talker: LlmClient = { provider: 'openai', model: 'm', chat: (_r: ChatRequest): Promise<ChatResponse> => Promise.resolve({ text: 'hello', toolCalls: [], inputTokens: 1, outputTokens: 1 }) };
const obs = (episode: number): Observation => ({ state: {}, actions: [{ name: 'respond', parameters: { type: 'object' } }], episode, step: 0, task: { id: `t${episode}`, instruction: 'say hi' } });
const ctx: PolicyContext = { rng: new Rng(1), signal: new AbortController().signal };

describe('an llm: agent over many episodes', () => {
  it('lets each episode’s conversation go when it ends (a long-lived server holds only those in flight), unless told to keep them', async () => {
    for (const keep of [false, true]) {
      const agent = llmAgent({ agent: talker, agentSpec: { model: 'm' }, system: 's', ...(keep ? { keepConversations: true } : {}) });
      for (let episode = 0; episode < 3; episode++) {
        await agent.policy(obs(episode), ctx);
        expect(agent.conversation(episode)?.at(-1)).toEqual({ role: 'assistant', content: 'hello' });
        agent.ended(episode);
      }
      expect(agent.conversations().map((c) => c.episode)).toEqual(keep ? [0, 1, 2] : []);
      expect(agent.conversation(1) === undefined).toBe(!keep);
    }
  });
});
