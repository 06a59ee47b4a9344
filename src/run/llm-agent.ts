/**
 * `--policy llm:<model>` and `--user llm:<model>`: an LLM agent with tool calling (the env's
 * enabled actions as tools, the suite's policy document as system prompt) talking to a simulated
 * user in the manner of tau-bench's: the user model is given the task's instruction, answers the
 * agent's `respond` messages one line at a time, and ends the conversation with `###STOP###`.
 *
 * The agent's plain text is its `respond` action; its tool calls are the env's actions, one per
 * step (several calls in one turn are run one after another, and all their results go back
 * together). In an env with two sides (τ²-bench telecom) the simulated user has tools too, the
 * env's actions of `"actor": "user"`: each of its calls is a step of the episode made as the user,
 * its result goes back to the user model only, and the agent sees only what the user then says.
 * Without a simulated user, the task's instruction is the user's only message and the
 * episode ends with the agent's first answer. Outside a benchmark (`agent run`), the instruction is
 * the one given, or the env's description.
 *
 * In token mode (a {@link TokenChat}), the agent's turns are generated token-in, token-out and each
 * `llm_call` event carries the turn's ids; the tools are the ones enabled at the episode's first
 * step (the prompt is rendered once); a turn whose text holds a call the parser cannot read is
 * answered with the error, like a refused call, and counts as an invalid action. Given a `gold`
 * policy (`--policy gold --tokens`), every turn is its action rendered by the chat template as the
 * model's turn instead of generated: token-exact supervised data.
 */
import type { Action } from '../env/agent-instance.js';
import { actionTool } from '../env/action-tool.js';
import { chatMessages, chatTurns, type ChatTurn } from '../llm/chat-turns.js';
import { createLlmClient, reportedChat, type ChatMessage, type ChatRequest, type ChatResponse, type LlmCallReport, type LlmClient, type ToolCall } from '../llm/client.js';
import { costOf, priceOf } from '../llm/prices.js';
import { assertReachable } from '../llm/reachable.js';
import { TokenChat, type GoldTurn, type TokenServers } from '../llm/token-chat.js';
import type { SamplingSettings } from '../llm/vllm.js';
import { LLM_DEFAULTS } from '../shared/defaults.js';
import type { Observation, Policy, PolicyContext } from './policy.js';
import type { LlmRunConfig } from '../events/run-events.js';
import { AgentError, describeError, oneLine } from '../shared/errors.js';
import { validate } from '../schema/ajv.js';
import type { JsonValue } from '../shared/json.js';

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

/** How an `llm:<model>` policy is served and sampled: chat mode (any provider) or token mode against a vLLM-compatible server. */
export interface LlmPolicySettings {
  /** A local or proxy server (vLLM, Ollama: include `/v1` for OpenAI-compatible ones); token mode needs one. */
  readonly baseURL?: string;
  readonly provider?: 'anthropic' | 'openai';
  readonly apiKeyEnv?: string;
  /** Default 0, or 1 in token mode. */
  readonly temperature?: number;
  /** Default 1. */
  readonly topP?: number;
  /** Default 2048; sent on every request. */
  readonly maxTokens?: number;
  /** Token-in, token-out generation: every turn's ids and logprobs are recorded on its `llm_call` event. */
  readonly tokens?: boolean;
  /** Token mode: vLLM's name of the tool-call format (`hermes`, the default, or `llama3_json`). */
  readonly toolParser?: string;
  /** Token mode: tokens at most per episode (default: the server's max_model_len). */
  readonly maxContext?: number;
  /** `llm:<model>`: a simulated user (tau-bench's), chat mode. */
  readonly user?: string;
  /** Token mode: the weights' version the trainer last declared, for turns the server does not label. */
  readonly weightVersion?: () => number | undefined;
  /** Token mode: awaited before each completion is sent (a paused rollouts socket). */
  readonly beforeGenerate?: (signal?: AbortSignal) => Promise<void>;
}

/**
 * What the runtime itself adds to an `llm:` policy's settings, beside the public ones: `agent
 * serve` shares the inference servers its rollouts requests checked (one request a training step
 * would otherwise probe the server again each time). Passed along inside `PolicySetup.llm`.
 */
export interface LlmServingSettings extends LlmPolicySettings {
  readonly tokenServers?: TokenServers;
}

/**
 * The agent of an `llm:<model>` policy, checked before any episode (a token-mode server is probed
 * for every route and field it needs), with what the run records of it.
 */
export async function createLlmAgent(model: string, settings: LlmServingSettings, context: { readonly system: string; readonly instruction?: string; readonly seed: number; readonly signal?: AbortSignal; readonly gold?: Policy; readonly keepConversations?: boolean }): Promise<{ readonly agent: LlmAgent; readonly config: LlmRunConfig }> {
  const userModel = settings.user === undefined ? undefined : llmModel(settings.user);
  if (settings.user !== undefined && userModel === undefined) throw new AgentError('BAD_USAGE', `--user '${settings.user}' is not llm:<model>`, { hint: 'Pass --user llm:<model>, e.g. llm:gpt-4o.' });
  if (context.gold && settings.tokens !== true) throw new AgentError('BAD_USAGE', 'gold turns as model turns are a token mode feature', { hint: 'Pass --tokens with --llm-base-url, or run --policy gold alone.' });
  const { provider, sampling, tokens, config: served } = await llmServing(model, settings, context.seed, context.signal);
  // Token mode probed its server already; a chat server named by URL is asked once here, so a wrong one fails nothing but the start.
  if (tokens === undefined && settings.baseURL !== undefined) await assertReachable(settings.baseURL, context.signal);
  const serving = { ...(settings.baseURL !== undefined ? { baseURL: settings.baseURL } : {}), provider, ...(settings.apiKeyEnv !== undefined ? { apiKeyEnv: settings.apiKeyEnv } : {}) };
  const agentSpec: LlmSpec = { model, ...serving, maxTokens: sampling.max_tokens, temperature: sampling.temperature };
  const userSpec: LlmSpec | undefined = userModel === undefined ? undefined : { model: userModel, ...serving, provider: settings.provider ?? (userModel.startsWith('claude') ? 'anthropic' : 'openai') };
  const agent = llmAgent({
    agent: await llmClient(agentSpec),
    agentSpec,
    ...(tokens ? { tokens } : {}),
    ...(userSpec ? { user: { client: await llmClient(userSpec), spec: userSpec } } : {}),
    system: context.system,
    ...(context.instruction !== undefined ? { instruction: context.instruction } : {}),
    ...(context.gold ? { gold: context.gold } : {}),
    ...(context.keepConversations ? { keepConversations: true } : {}),
  });
  return { agent, config: { ...served, ...(settings.user !== undefined ? { user: settings.user } : {}) } };
}

/**
 * Where a model is served and how it is sampled, checked before any episode: in token mode the
 * server is probed for every route and field it needs (a vLLM-compatible one at `baseURL`). What
 * run.json records of it comes with it.
 */
export async function llmServing(model: string, settings: LlmServingSettings, seed: number, signal: AbortSignal | undefined): Promise<{ readonly provider: 'anthropic' | 'openai'; readonly sampling: SamplingSettings; readonly tokens: TokenChat | undefined; readonly config: LlmRunConfig }> {
  const tokensMode = settings.tokens === true;
  const provider = settings.provider ?? (model.startsWith('claude') && !tokensMode ? 'anthropic' : 'openai');
  if (tokensMode && (settings.baseURL === undefined || provider !== 'openai')) {
    throw new AgentError('BAD_USAGE', '--tokens generates token-in, token-out against a vLLM-compatible server: it needs --llm-base-url', { hint: 'Pass --llm-base-url http://<host>:8000/v1 of a vLLM server (vllm serve <model>), or drop --tokens to chat with a provider.' });
  }
  const sampling = {
    temperature: settings.temperature ?? (tokensMode ? LLM_DEFAULTS.tokensTemperature : LLM_DEFAULTS.temperature),
    top_p: settings.topP ?? LLM_DEFAULTS.topP,
    max_tokens: settings.maxTokens ?? LLM_DEFAULTS.maxTokens,
  };
  const tokens = tokensMode
    ? await TokenChat.open(
        {
          baseURL: settings.baseURL as string,
          model,
          sampling,
          seed,
          toolParser: settings.toolParser ?? LLM_DEFAULTS.toolParser,
          ...(settings.maxContext !== undefined ? { maxContext: settings.maxContext } : {}),
          ...(settings.weightVersion ? { weightVersion: settings.weightVersion } : {}),
          ...(settings.beforeGenerate ? { beforeGenerate: settings.beforeGenerate } : {}),
          ...(settings.tokenServers ? { servers: settings.tokenServers } : {}),
          ...(settings.apiKeyEnv !== undefined && process.env[settings.apiKeyEnv] ? { apiKey: process.env[settings.apiKeyEnv] as string } : {}),
        },
        signal,
      )
    : undefined;
  const config: LlmRunConfig = {
    model,
    provider,
    ...(settings.baseURL !== undefined ? { base_url: settings.baseURL } : {}),
    tokens: tokensMode,
    sampling: { ...sampling, seed },
    ...(tokens ? { tool_parser: settings.toolParser ?? LLM_DEFAULTS.toolParser, max_context: tokens.limit, max_model_len: tokens.server.maxModelLen } : {}),
  };
  return { provider, sampling, tokens, config };
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
  /** The user's own tool calls still to make, and the one whose result is awaited (two-sided envs). */
  userPending: ToolCall[];
  userLastCall?: ToolCall;
  readonly usage: Usage;
  /** Token mode: the turns generated so far. */
  turns: number;
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

/** The simulated user: a model playing the task's user, one message at a time (and, where it has a device of its own, working it with its tools). */
class SimulatedUser {
  readonly #client: LlmClient;
  readonly #system: string;
  readonly #spec: LlmSpec;
  readonly #messages: ChatMessage[] = [];

  constructor(client: LlmClient, spec: LlmSpec, instruction: string, hasTools: boolean) {
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
      ...(hasTools
        ? ['- You have tools that act on your own device. When the agent asks you to check or change something on it, use the tool, then tell the agent in your own words what you did and saw. Never make up what a tool would show.']
        : []),
      `- When your goal is met, or cannot be met, reply with ${STOP} alone to end the conversation.`,
      '- Use your own words and keep the personality the situation describes.',
    ].join('\n');
  }

  /** The customer's next turn: after what the agent said (the first call: the opening), or, with nothing new, after its own calls' results. */
  async turn(agentSaid: string | undefined, tools: readonly ReturnType<typeof actionTool>[], usage: Usage, ctx: PolicyContext): Promise<ChatResponse> {
    if (agentSaid !== undefined) this.#messages.push({ role: 'user', content: agentSaid });
    const report = ctx.reportLlmCall;
    const res = await reportedChat(
      this.#client,
      { system: this.#system, messages: this.#messages, ...(tools.length > 0 ? { tools } : {}), maxTokens: this.#spec.maxTokens ?? 1024, temperature: this.#spec.temperature ?? 0, signal: ctx.signal },
      report && ((call) => report('user', call)),
    );
    charge(usage, this.#client.model, res.inputTokens, res.outputTokens);
    this.#messages.push({ role: 'assistant', content: res.text, ...(res.toolCalls.length > 0 ? { toolCalls: res.toolCalls } : {}) });
    return res;
  }

  /** The conversation so far, from the customer's side: what the agent said is its user's turns, what the customer said its own (tool traffic is the agent's alone). */
  recall(history: readonly ChatMessage[]): void {
    for (const m of history) {
      if (m.role === 'user') this.#messages.push({ role: 'assistant', content: m.content });
      else if (m.role === 'assistant' && m.content !== '') this.#messages.push({ role: 'user', content: m.content });
    }
  }

  /** What one of the customer's own calls gave (or the error a refused one is answered with): in the customer's conversation only. */
  toolResult(call: ToolCall, content: string): void {
    this.#messages.push({ role: 'tool', toolCallId: call.id, content });
  }
}

export interface LlmAgent {
  readonly policy: Policy;
  /** Each episode's conversation so far. */
  conversations(): Conversation[];
  /** One episode's conversation so far (the system prompt first), or undefined when it has not talked. */
  conversation(episode: number): ChatTurn[] | undefined;
  usage(episode: number): Usage | undefined;
  /** Tool calls of an episode refused before they reached the env (unknown tool, bad params, a call the tool parser cannot read). */
  invalidCalls(episode: number): number;
  /** The episode is over: its token sequence is let go (its turns are in the run's events), and its conversation unless kept. */
  ended(episode: number): void;
}

/** What an LLM agent is made of: the agent's model (token mode when `tokens` is given), a simulated user, the system prompt, and the instruction outside a benchmark. */
export interface LlmAgentOptions {
  readonly agent: LlmClient;
  readonly agentSpec: LlmSpec;
  /** Token mode: the agent's turns are generated from token ids (see TokenChat). */
  readonly tokens?: TokenChat;
  readonly user?: { readonly client: LlmClient; readonly spec: LlmSpec };
  readonly system: string;
  /** What the user asks when the observation carries no task (`agent run`). */
  readonly instruction?: string;
  /** Token mode: every turn is this policy's action rendered as the model's turn (a `respond` as its text), not generated. */
  readonly gold?: Policy;
  /**
   * Keep each episode's conversation after it ends, for `conversations()` (a benchmark writes them
   * all). Otherwise an episode's conversation goes when it ends: a long-lived server holds only the
   * episodes in flight.
   */
  readonly keepConversations?: boolean;
}

export function llmAgent(options: LlmAgentOptions): LlmAgent {
  const talks = new Map<number, EpisodeTalk>();
  const tasks = new Map<number, string>();
  const policy: Policy = async (obs, ctx): Promise<Action | null> => {
    const instruction = obs.task?.instruction ?? options.instruction;
    if (instruction === undefined) throw new AgentError('BAD_USAGE', 'an llm: policy needs a task or an instruction: what the user asks', { hint: 'Run it with agent benchmark (each task says what the user wants), or pass --instruction to agent run.' });
    let talk = talks.get(obs.episode);
    const userTools = (obs.user_actions ?? []).map(actionTool);
    if (!talk) {
      talk = { messages: [], pending: [], userPending: [], invalid: 0, usage: { inputTokens: 0, outputTokens: 0, usd: 0 }, turns: 0 };
      talks.set(obs.episode, talk);
      tasks.set(obs.episode, obs.task?.id ?? '');
      // A task may start mid-conversation (τ²'s message history): both sides go on from it.
      const history = chatMessages(obs.task?.history ?? []);
      talk.messages.push(...history);
      if (!options.user) talk.messages.push({ role: 'user', content: instruction });
      else {
        talk.user = new SimulatedUser(options.user.client, options.user.spec, instruction, userTools.length > 0);
        const last = history.at(-1);
        // The user speaks first: to the agent's greeting, or to what the agent said last; after the user's own words, the agent does.
        const agentSaid = last === undefined ? 'Hi! How can I help you today?' : last.role === 'assistant' && !last.toolCalls?.length ? last.content : undefined;
        talk.user.recall(agentSaid === undefined ? history : history.slice(0, -1));
        if (agentSaid !== undefined) {
          const turn = await userTurn(talk, obs, agentSaid, userTools, ctx);
          if (turn !== undefined) return turn;
        }
      }
    } else if (talk.userLastCall) {
      // The user's own call settled: its result goes back to the user, who goes on.
      (talk.user as SimulatedUser).toolResult(talk.userLastCall, render(obs));
      talk.userLastCall = undefined;
      const turn = await userTurn(talk, obs, undefined, userTools, ctx);
      if (turn !== undefined) return turn;
    } else if (talk.lastCall) {
      talk.messages.push({ role: 'tool', toolCallId: talk.lastCall.id, content: render(obs) });
      talk.lastCall = undefined;
    } else if (talk.lastSaid !== undefined) {
      // The agent answered the user: the conversation goes on only with a user to answer back.
      if (!talk.user) return null;
      const said = talk.lastSaid;
      talk.lastSaid = undefined;
      const turn = await userTurn(talk, obs, said, userTools, ctx);
      if (turn !== undefined) return turn;
    }
    const tools = obs.actions.filter((a) => a.name !== 'respond').map(actionTool);
    // A call the env would refuse (an unknown or disabled tool, params its schema rejects) is
    // answered with the error, as tau-bench's env answers it, and the model tries again.
    for (let refused = 0; refused <= MAX_REFUSED_IN_A_ROW; ) {
      let call = talk.pending.shift();
      if (!call) {
        const report = ctx.reportLlmCall;
        const request = { system: options.system, messages: talk.messages, tools, maxTokens: options.agentSpec.maxTokens ?? 2048, temperature: options.agentSpec.temperature ?? 0, signal: ctx.signal };
        let gold: GoldTurn | undefined;
        if (options.gold) {
          const action = await options.gold(obs, ctx);
          if (action === null) return null;
          // The user's own gold step (τ²'s telecom): made as the user's, never a turn of the agent model.
          if (action.actor === 'user') return action;
          gold = action.name === 'respond' ? { text: String(action.params?.['content'] ?? '') } : { calls: [{ name: action.name, arguments: action.params ?? {} }] };
        }
        const res = await agentTurn(obs.episode, request, report && ((call) => report('policy', call)), gold);
        charge(talk.usage, options.agent.model, res.inputTokens, res.outputTokens);
        talk.turns++;
        talk.messages.push({ role: 'assistant', content: res.text, ...(res.toolCalls.length > 0 ? { toolCalls: res.toolCalls } : {}) });
        if (res.invalid !== undefined) {
          talk.invalid++;
          refused++;
          talk.messages.push({ role: 'tool', toolCallId: `invalid_${obs.episode}_${talk.turns}`, content: `Error: ${res.invalid}` });
          continue;
        }
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
  /**
   * The simulated user's turn: its own tool calls are made one per step as the user's (`{actor:
   * 'user'}`); what it then says is the agent's next user message. Returns the step to take (a user
   * call, or null when the user ends the conversation), or undefined when the agent's turn comes.
   */
  const userTurn = async (talk: EpisodeTalk, obs: Observation, agentSaid: string | undefined, tools: readonly ReturnType<typeof actionTool>[], ctx: PolicyContext): Promise<Action | null | undefined> => {
    const user = talk.user as SimulatedUser;
    let next = agentSaid;
    for (let refused = 0; refused <= MAX_REFUSED_IN_A_ROW; ) {
      let call = talk.userPending.shift();
      if (!call) {
        const res = await user.turn(next, tools, talk.usage, ctx);
        next = undefined;
        if (res.toolCalls.length === 0) {
          const text = res.text.trim();
          if (text.includes(STOP)) return null;
          talk.messages.push({ role: 'user', content: text });
          return undefined;
        }
        [call, ...talk.userPending] = res.toolCalls as [ToolCall, ...ToolCall[]];
      }
      const problem = refusal({ ...obs, actions: obs.user_actions ?? [] }, call);
      if (problem === undefined) {
        talk.userLastCall = call;
        return { name: call.name, params: call.arguments, actor: 'user' };
      }
      refused++;
      user.toolResult(call, `Error: ${problem}`);
    }
    // A user model that keeps calling what it does not have ends the conversation.
    return null;
  };
  /** The agent model's next turn: a chat call, or in token mode a generation from the episode's ids (reported with them). */
  const agentTurn = async (episode: number, request: ChatRequest, report: ((call: LlmCallReport) => void) | undefined, gold: GoldTurn | undefined): Promise<ChatResponse & { readonly invalid?: string }> => {
    const tokens = options.tokens;
    if (!tokens) return reportedChat(options.agent, request, report);
    const t0 = performance.now();
    const base = { provider: 'openai' as const, model: options.agent.model };
    try {
      const res = await tokens.turn(episode, { ...(request.system !== undefined ? { system: request.system } : {}), messages: request.messages, tools: request.tools ?? [], ...(request.signal ? { signal: request.signal } : {}), ...(gold ? { gold } : {}) });
      report?.({ ...base, duration_ms: performance.now() - t0, input_tokens: res.inputTokens, output_tokens: res.outputTokens, tokens: res.tokens });
      return { text: res.text, toolCalls: res.toolCalls, inputTokens: res.inputTokens, outputTokens: res.outputTokens, ...(res.tokens.invalid !== undefined ? { invalid: res.tokens.invalid } : {}) };
    } catch (err) {
      report?.({ ...base, duration_ms: performance.now() - t0, input_tokens: 0, output_tokens: 0, error: oneLine(describeError(err)) });
      throw err;
    }
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
    conversation: (episode) => {
      const talk = talks.get(episode);
      return talk && chatTurns(options.system, talk.messages);
    },
    usage: (episode) => talks.get(episode)?.usage,
    invalidCalls: (episode) => talks.get(episode)?.invalid ?? 0,
    ended: (episode) => {
      options.tokens?.end(episode);
      if (options.keepConversations) return;
      talks.delete(episode);
      tasks.delete(episode);
    },
  };
}
