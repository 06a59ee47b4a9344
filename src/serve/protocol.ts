/**
 * The shapes `agent serve` speaks: OpenEnv's (so its unmodified clients work) with our env inside.
 * - A reply to reset or step is OpenEnv's `{observation, reward, done}`; the tool's own output sits
 *   under `observation.observation`, never merged into the envelope, beside the actions enabled now
 *   (OpenAI tool format), the trace id and the episode id. The per-source reward breakdown and the
 *   step's info sit beside `reward` (OpenEnv's client ignores keys it does not know).
 * - `state` is OpenEnv's (`episode_id`, `step_count`) plus the env's state and its seq.
 * - An action is `{"name", "params"}`, or an OpenAI tool call (`{"type": "function", "function":
 *   {"name", "arguments"}}`, arguments as an object or a JSON string); either with `"actor": "user"`
 *   for the user's side of an env that has one (its actions are listed as `user_actions`).
 */
import type { AvailableAction, StepResult } from '../env/agent-instance.js';
import type { ErrorInfo, RewardEntry } from '../events/env-events.js';
import { AgentError, isAgentError } from '../shared/errors.js';
import { isPlainObject, type JsonObject, type JsonValue } from '../shared/json.js';
import type { Action } from '../env/agent-instance.js';
import { actionTool } from '../env/action-tool.js';
import { openAiTool, type OpenAiTool } from '../llm/client.js';


export interface ServedObservation {
  /** The tool's observation (null on reset, and for a failed step). */
  readonly observation: JsonValue;
  readonly actions: readonly OpenAiTool[];
  /** In an env with two sides (τ²-bench telecom): the user's actions enabled now, which a client playing the user sends with `"actor": "user"`. */
  readonly user_actions?: readonly OpenAiTool[];
  readonly episode_id: string;
  /** The step's trace (null on reset). */
  readonly trace_id: string | null;
  /** Steps committed in the episode so far. */
  readonly step: number;
  /** A benchmark task's instruction (served suites, reset with `task_id`). */
  readonly instruction?: string;
  readonly task_id?: string;
  /** Why the step failed, when it did. */
  readonly error?: ErrorInfo;
}

/** A reply to reset or step: OpenEnv's envelope, our breakdown beside it. */
export interface StepEnvelope {
  readonly observation: ServedObservation;
  readonly reward: number | null;
  readonly done: boolean;
  /** The step was cut by the episode's step limit (done is true too). */
  readonly truncated: boolean;
  /** Per reward source: status, value, delay (delayed sources are pending until they arrive). */
  readonly rewards: Readonly<Record<string, RewardEntry>>;
  readonly info?: { readonly trace_id: string; readonly status: string; readonly seq: number; readonly duration_ms: number; readonly attempts: number };
}

export function openAiTools(actions: readonly AvailableAction[]): OpenAiTool[] {
  return actions.map((a) => openAiTool(actionTool(a)));
}

/** A reply already in JSON (a step's: see `ToolLists.envelopeJson`). */
export class Serialized {
  constructor(readonly json: string) {}

  /** With the request's id, as `JSON.stringify({ ...reply, id })` puts it. */
  withId(id: unknown): string {
    return id === undefined ? this.json : `${this.json.slice(0, -1)},"id":${JSON.stringify(id)}}`;
  }
}

/** The tool lists a client was last sent (a socket that asked for them on change only). */
export interface SentLists {
  actions?: readonly OpenAiTool[];
  userActions?: readonly OpenAiTool[] | undefined;
}

/** Past this many sets of enabled actions, a list is built for each reply instead of kept (an env whose `enabled_if` makes many). */
const KEPT_TOOL_LISTS = 256;

/**
 * The tool lists an env's observations offer, built and serialized once per set of enabled actions:
 * every reply carries one, and τ-bench airline's is 9 KB of JSON (~36 µs to build and serialize,
 * each step). A list from here is spliced into a reply as its JSON (`envelopeJson`).
 */
export class ToolLists {
  readonly #byNames = new Map<string, readonly OpenAiTool[]>();
  readonly #json = new WeakMap<readonly OpenAiTool[], string>();

  of(actions: readonly AvailableAction[]): readonly OpenAiTool[] {
    // An env's action names are unique: they say which list this is.
    const key = actions.map((a) => a.name).join('\n');
    const kept = this.#byNames.get(key);
    if (kept) return kept;
    const tools = openAiTools(actions);
    if (this.#byNames.size < KEPT_TOOL_LISTS) {
      this.#byNames.set(key, tools);
      this.#json.set(tools, JSON.stringify(tools));
    }
    return tools;
  }

  #serialized(tools: readonly OpenAiTool[]): string {
    return this.#json.get(tools) ?? JSON.stringify(tools);
  }

  /**
   * The envelope's JSON (what `JSON.stringify` gives, its keys in another order), the tool lists as
   * serialized once. `sent`: the lists a client that asked for them on change only (reset's
   * `"actions": "on_change"`) was last sent; the same lists again are left out, `actions_unchanged:
   * true` in their place (a 9 KB list per step is most of a τ-bench reply, on the wire and in the
   * client's JSON parser).
   */
  envelopeJson(envelope: StepEnvelope, sent?: SentLists): string {
    const { observation, ...rest } = envelope;
    const { actions, user_actions: userActions, ...own } = observation;
    let lists = `"actions":${this.#serialized(actions)}${userActions ? `,"user_actions":${this.#serialized(userActions)}` : ''}`;
    if (sent) {
      // Lists kept here are one array per set of actions: the same array is the same list.
      if (sent.actions === actions && sent.userActions === userActions) lists = '"actions_unchanged":true';
      else Object.assign(sent, { actions, userActions });
    }
    // Both objects have keys (an observation its episode_id, an envelope its reward): each slice opens with one.
    return `{"observation":{${lists},${JSON.stringify(own).slice(1)},${JSON.stringify(rest).slice(1)}`;
  }
}

/** The action a client sent, in either form; a typed error naming the field otherwise. */
export function parseAction(raw: unknown, pointer = ''): Action {
  const bad = (field: string, want: string): never => {
    throw new AgentError('PARAMS_INVALID', `${pointer}${field} ${want}`, { hint: 'Send an action as {"name": "<action>", "params": {…}} or an OpenAI tool call {"type": "function", "function": {"name", "arguments"}}.' });
  };
  if (!isPlainObject(raw)) return bad('', 'must be an object');
  const actor = raw['actor'];
  if (actor !== undefined && actor !== null && actor !== 'agent' && actor !== 'user') return bad('/actor', 'must be "agent" (the default) or "user"');
  const side = actor === 'user' ? { actor: 'user' as const } : {};
  if (isPlainObject(raw['function'])) {
    const fn = raw['function'];
    if (typeof fn['name'] !== 'string') return bad('/function/name', 'must be a string');
    let args: unknown = fn['arguments'] ?? {};
    if (typeof args === 'string') {
      try {
        args = args.trim() === '' ? {} : (JSON.parse(args) as unknown);
      } catch {
        return bad('/function/arguments', 'is not JSON');
      }
    }
    if (!isPlainObject(args)) return bad('/function/arguments', 'must be an object (or a JSON string of one)');
    return { name: fn['name'], params: args as JsonObject, ...side };
  }
  if (typeof raw['name'] !== 'string') return bad('/name', 'must be a string');
  const params = raw['params'] ?? {};
  if (!isPlainObject(params)) return bad('/params', 'must be an object');
  return { name: raw['name'], params: params as JsonObject, ...side };
}

/** A step result as OpenEnv's envelope. */
export function stepEnvelope(result: StepResult, base: Omit<ServedObservation, 'observation' | 'trace_id' | 'error'>, truncated: boolean): StepEnvelope {
  const { info } = result;
  return {
    observation: Object.assign({}, base, { observation: result.observation ?? null, trace_id: info.trace_id }, info.error ? { error: info.error } : {}),
    reward: info.status === 'timeout' ? null : result.reward,
    done: result.done || truncated,
    truncated,
    rewards: result.rewards,
    info: { trace_id: info.trace_id, status: info.status, seq: info.seq, duration_ms: info.duration_ms, attempts: info.attempts },
  };
}

/** An error as OpenEnv's clients read it (`data.message`, `data.code`), with our hint and field. */
export function errorData(err: unknown): { message: string; code: string; hint?: string; pointer?: string } {
  if (!isAgentError(err)) return { message: err instanceof Error ? err.message : String(err), code: 'INTERNAL' };
  const pointer = (err as { issues?: readonly { pointer: string }[] }).issues?.[0]?.pointer;
  return { message: err.message, code: err.code, ...(err.hint ? { hint: err.hint } : {}), ...(pointer !== undefined ? { pointer } : {}) };
}
