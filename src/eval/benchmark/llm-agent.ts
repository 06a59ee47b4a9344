/**
 * `--policy llm:<model>` and `--user llm:<model>`: an LLM agent with tool calling (the env's
 * enabled actions as tools, the suite's policy document as system prompt) talking to a simulated
 * user in the manner of tau-bench's: the user model is given the task's instruction, answers the
 * agent's `respond` messages one line at a time, and ends the conversation with `###STOP###`.
 *
 * The agent's plain text is its `respond` action; its tool calls are the env's actions, one per
 * step (several calls in one turn are run one after another, and all their results go back
 * together). Without a simulated user, the task's instruction is the user's only message and the
 * episode ends with the agent's first answer.
 */
import type { Action } from '../../env/agent-instance.js';
import { chatTurns, type ChatTurn } from '../../llm/chat-turns.js';
import { createLlmClient, reportedChat, type ChatMessage, type LlmClient, type ToolCall } from '../../llm/client.js';
import { costOf, priceOf } from '../../llm/prices.js';
import type { Observation, Policy, PolicyContext } from '../../run/policy.js';
import { AgentError } from '../../shared/errors.js';
import { validate } from '../../schema/ajv.js';
import type { JsonValue } from '../../shared/json.js';

export const STOP = '###STOP###';
/** Refused calls in a row before the episode is stopped. */
const MAX_REFUSED_IN_A_ROW = 5;

/** Why the env would refuse this call, or undefined: the tool must be enabled now, and its arguments valid. */
function refusal(obs: Observation, call: ToolCall): string | undefined {
  const action = obs.actions.find((a) => a.name === call.name);
  if (!action) return `unknown action ${call.name}${obs.actions.length > 0 ? ` (available: ${obs.actions.map((a) => a.name).join(', ')})` : ''}`;
  const issues = validate(action.parameters, call.arguments);
  const first = issues[0];
  return first ? `invalid arguments for ${call.name}: ${first.pointer || '/'} ${first.message}` : undefined;
}

export interface LlmSpec {
  readonly model: string;
  /** Default: anthropic for `claude-*` models, else openai (any OpenAI-compatible server). */
  readonly provider?: 'anthropic' | 'openai';
  /** A local or proxy server (vLLM, Ollama: include `/v1` for OpenAI-compatible ones). */
  readonly baseURL?: string;
  readonly apiKeyEnv?: string;
  readonly maxTokens?: number;
  readonly temperature?: number;
}

/** `llm:<model>` → the model, or undefined for any other policy name. */
export function llmModel(spec: string): string | undefined {
  return spec.startsWith('llm:') && spec.length > 4 ? spec.slice(4) : undefined;
}

export async function llmClient(spec: LlmSpec): Promise<LlmClient> {
  const provider = spec.provider ?? (spec.model.startsWith('claude') ? 'anthropic' : 'openai');
  return createLlmClient({
    provider,
    model: spec.model,
    apiKeyEnv: spec.apiKeyEnv ?? (provider === 'anthropic' ? 'ANTHROPIC_API_KEY' : 'OPENAI_API_KEY'),
    maxRetries: 3,
    timeoutMs: 120_000,
    ...(spec.baseURL !== undefined ? { baseURL: spec.baseURL } : {}),
  });
}

/** Tokens and money an episode's model calls cost (agent and user). */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** null when a model's price is unknown. */
  usd: number | null;
}

/**
 * One episode's conversation, as written to conversations.jsonl: exactly what the agent model was
 * given and answered (refused calls and their errors included), in OpenAI's chat shape, so
 * `agent export --format chat` reproduces it as it was.
 */
export interface Conversation {
  readonly episode: number;
  readonly task_id: string;
  readonly messages: ChatTurn[];
  readonly usage: { readonly input_tokens: number; readonly output_tokens: number; readonly usd: number | null };
}

interface EpisodeTalk {
  readonly messages: ChatMessage[];
  pending: ToolCall[];
  lastCall?: ToolCall;
  /** Calls refused before they reached the env (unknown tool, bad params). */
  invalid: number;
  lastSaid?: string;
  user?: SimulatedUser;
  readonly usage: Usage;
}

function charge(usage: Usage, model: string, input: number, output: number): void {
  usage.inputTokens += input;
  usage.outputTokens += output;
  const usd = costOf(priceOf(model), input, output);
  usage.usd = usage.usd === null || usd === undefined ? null : usage.usd + usd;
}

/** What the agent sees of a step: the observation as text, or the error it failed with. */
function render(obs: Observation): string {
  if (obs.lastError) return `Error: ${obs.lastError.message}`;
  const o: JsonValue | undefined = obs.lastObservation;
  return typeof o === 'string' ? o : JSON.stringify(o ?? null);
}

/** The simulated user: a model playing the task's user, one message at a time. */
class SimulatedUser {
  readonly #client: LlmClient;
  readonly #system: string;
  readonly #spec: LlmSpec;
  readonly #messages: ChatMessage[] = [];

  constructor(client: LlmClient, spec: LlmSpec, instruction: string) {
    this.#client = client;
    this.#spec = spec;
    this.#system = [
      'You play a customer talking to a customer-service agent. Your situation and goal:',
      instruction,
      '',
      'How to play it:',
      '- Write one short message at a time, as the customer would type it.',
      '- Reveal only what the agent needs for the current step; never paste your whole situation at once.',
      '- Do not invent facts your situation does not give; if asked for something you do not know, say you do not know it.',
      `- When your goal is met, or cannot be met, reply with ${STOP} alone to end the conversation.`,
      '- Use your own words and keep the personality the situation describes.',
    ].join('\n');
  }

  /** The customer's reply to what the agent said (the first call: the opening message). */
  async reply(agentSaid: string, usage: Usage, ctx: PolicyContext): Promise<string> {
    this.#messages.push({ role: 'user', content: agentSaid });
    const report = ctx.reportLlmCall;
    const res = await reportedChat(this.#client, { system: this.#system, messages: this.#messages, maxTokens: this.#spec.maxTokens ?? 1024, temperature: this.#spec.temperature ?? 0, signal: ctx.signal }, report && ((call) => report('user', call)));
    charge(usage, this.#client.model, res.inputTokens, res.outputTokens);
    this.#messages.push({ role: 'assistant', content: res.text });
    return res.text.trim();
  }
}

export interface LlmAgent {
  readonly policy: Policy;
  /** Each episode's conversation so far. */
  conversations(): Conversation[];
  usage(episode: number): Usage | undefined;
  /** Tool calls of an episode refused before they reached the env (unknown tool, params its schema rejects). */
  invalidCalls(episode: number): number;
}

export function llmAgent(options: { readonly agent: LlmClient; readonly agentSpec: LlmSpec; readonly user?: { readonly client: LlmClient; readonly spec: LlmSpec }; readonly system: string }): LlmAgent {
  const talks = new Map<number, EpisodeTalk>();
  const tasks = new Map<number, string>();
  const policy: Policy = async (obs, ctx): Promise<Action | null> => {
    if (!obs.task) throw new AgentError('BAD_USAGE', 'an llm: policy needs a task (run it with agent benchmark)');
    let talk = talks.get(obs.episode);
    if (!talk) {
      talk = { messages: [], pending: [], invalid: 0, usage: { inputTokens: 0, outputTokens: 0, usd: 0 } };
      talks.set(obs.episode, talk);
      tasks.set(obs.episode, obs.task.id);
      let opening = obs.task.instruction;
      if (options.user) {
        talk.user = new SimulatedUser(options.user.client, options.user.spec, obs.task.instruction);
        opening = await talk.user.reply('Hi! How can I help you today?', talk.usage, ctx);
        if (opening.includes(STOP)) return null;
      }
      talk.messages.push({ role: 'user', content: opening });
    } else if (talk.lastCall) {
      talk.messages.push({ role: 'tool', toolCallId: talk.lastCall.id, content: render(obs) });
      talk.lastCall = undefined;
    } else if (talk.lastSaid !== undefined) {
      // The agent answered the user: the conversation goes on only with a user to answer back.
      if (!talk.user) return null;
      const reply = await talk.user.reply(talk.lastSaid, talk.usage, ctx);
      talk.lastSaid = undefined;
      if (reply.includes(STOP)) return null;
      talk.messages.push({ role: 'user', content: reply });
    }
    const tools = obs.actions.filter((a) => a.name !== 'respond').map((a) => ({ name: a.name, ...(a.description !== undefined ? { description: a.description } : {}), parameters: a.parameters }));
    // A call the env would refuse (an unknown or disabled tool, params its schema rejects) is
    // answered with the error, as tau-bench's env answers it, and the model tries again.
    for (let refused = 0; refused <= MAX_REFUSED_IN_A_ROW; ) {
      let call = talk.pending.shift();
      if (!call) {
        const report = ctx.reportLlmCall;
        const request = { system: options.system, messages: talk.messages, tools, maxTokens: options.agentSpec.maxTokens ?? 2048, temperature: options.agentSpec.temperature ?? 0, signal: ctx.signal };
        const res = await reportedChat(options.agent, request, report && ((call) => report('policy', call)));
        charge(talk.usage, options.agent.model, res.inputTokens, res.outputTokens);
        talk.messages.push({ role: 'assistant', content: res.text, ...(res.toolCalls.length > 0 ? { toolCalls: res.toolCalls } : {}) });
        if (res.toolCalls.length === 0) return say(talk, obs, res.text);
        [call, ...talk.pending] = res.toolCalls as [ToolCall, ...ToolCall[]];
      }
      const problem = refusal(obs, call);
      if (problem === undefined) {
        talk.lastCall = call;
        return { name: call.name, params: call.arguments };
      }
      talk.invalid++;
      refused++;
      talk.messages.push({ role: 'tool', toolCallId: call.id, content: `Error: ${problem}` });
    }
    // A model that keeps calling what does not exist is stopped rather than billed forever.
    return null;
  };
  /** The agent's plain text: said to the user (its `respond`). */
  const say = (talk: EpisodeTalk, obs: Observation, text: string): Action | null => {
    talk.lastSaid = text;
    // An env without a respond action: the agent's answer ends the episode.
    if (!obs.actions.some((a) => a.name === 'respond')) return null;
    return { name: 'respond', params: { content: text } };
  };
  return {
    policy,
    conversations: () => [...talks].map(([episode, t]) => ({ episode, task_id: tasks.get(episode) ?? '', messages: chatTurns(options.system, t.messages), usage: { input_tokens: t.usage.inputTokens, output_tokens: t.usage.outputTokens, usd: t.usage.usd } })),
    usage: (episode) => talks.get(episode)?.usage,
    invalidCalls: (episode) => talks.get(episode)?.invalid ?? 0,
  };
}
