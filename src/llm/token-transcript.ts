/**
 * An episode as one token sequence: the first prompt as the server's chat template rendered it,
 * then, turn by turn, the ids the model generated (kept exactly, end-of-turn token included) and
 * the ids of what the environment said back (tool results, the user's turns), rendered by the same
 * template without re-rendering the model's turns.
 *
 * How the environment's messages become ids: the template renders them after a fixed two-message
 * prefix (`user`, `assistant`), and the ids past the prefix's own rendering are theirs. What the
 * template writes after an assistant's content (`<|im_end|>\n` in ChatML) is learnt once per run
 * from two renderings that differ only in that content; after a turn, the part of it the model did
 * not generate itself (the `\n` after its `<|im_end|>`; all of it when max_tokens cut the turn) is
 * the environment's. A template whose rendering of the prefix changes when messages follow it is
 * not prefix-stable: the turn is recorded with `drift` saying where, never hidden.
 */
import type { TokenTurn } from '../events/env-events.js';
import { AgentError } from '../shared/errors.js';
import { firstDifference, type Completion, type TemplateMessage, type VllmServer } from './vllm.js';

export type { TokenTurn };

const PREFIX: readonly TemplateMessage[] = [
  { role: 'user', content: '.' },
  { role: 'assistant', content: '.' },
];

/** What a chat template writes around messages, learnt from the server once per run. */
export class TemplateShape {
  /** The ids of the fixed prefix rendered alone. */
  readonly #prefix: readonly number[];
  /** What the template writes after an assistant's content (its end-of-turn token first). */
  readonly closing: readonly number[];

  private constructor(prefix: readonly number[], closing: readonly number[]) {
    this.#prefix = prefix;
    this.closing = closing;
  }

  static async learn(server: VllmServer, signal?: AbortSignal): Promise<TemplateShape> {
    const [prefix, other, opening] = await Promise.all([
      server.render(PREFIX, { addGenerationPrompt: false }, signal),
      server.render([PREFIX[0] as TemplateMessage, { role: 'assistant', content: ',' }], { addGenerationPrompt: false }, signal),
      server.render([PREFIX[0] as TemplateMessage], { addGenerationPrompt: true }, signal),
    ]);
    // Both renderings start with the opening (the user turn and the generation prompt), then the content, then the closing.
    const a = prefix.slice(firstDifference(prefix, opening) === opening.length ? opening.length : 0);
    const b = other.slice(firstDifference(other, opening) === opening.length ? opening.length : 0);
    let common = 0;
    while (common < a.length && common < b.length && a[a.length - 1 - common] === b[b.length - 1 - common]) common++;
    return new TemplateShape(prefix, a.slice(a.length - common));
  }

  /**
   * An assistant message as the model would have generated it: its ids as the template renders
   * them after the generation prompt, through its end-of-turn token (what a model stopping there
   * generates; the rest of the closing is the environment's, as after a sampled turn).
   */
  async assistantIds(server: VllmServer, message: Extract<TemplateMessage, { role: 'assistant' }>, signal?: AbortSignal): Promise<readonly number[]> {
    const user = PREFIX[0] as TemplateMessage;
    const [opening, full] = await Promise.all([server.render([user], { addGenerationPrompt: true }, signal), server.render([user, message], { addGenerationPrompt: false }, signal)]);
    const rest = Math.max(0, this.closing.length - 1);
    if (firstDifference(full, opening) !== opening.length || !endsWith(full, this.closing, this.closing.length)) {
      throw new AgentError('LLM_INCOMPATIBLE', "the server's chat template does not render an assistant turn with tool calls as the generation prompt followed by the turn and its closing", { hint: 'Gold turns in token mode need a template that renders assistant tool calls (Qwen2.5, Llama 3.1, Hermes); use --policy gold without --tokens otherwise.' });
    }
    return full.slice(opening.length, full.length - rest);
  }

  /** The ids the template closes a generated turn with that the model did not generate itself. */
  rest(generated: readonly number[]): readonly number[] {
    for (let k = Math.min(this.closing.length, generated.length); k > 0; k--) {
      if (endsWith(generated, this.closing, k)) return this.closing.slice(k);
    }
    return this.closing;
  }

  /**
   * The ids of `messages` (and the generation prompt after them) as the template renders them after
   * an assistant turn. A template that renders the prefix's assistant turn otherwise once messages
   * follow it (Qwen3's drops the last turn's `<think>` block) is not prefix-stable there: then the
   * messages are rendered after the prefix's user turn alone, which carries no content of ours, and
   * the drift is reported.
   */
  async render(server: VllmServer, messages: readonly TemplateMessage[], signal?: AbortSignal): Promise<{ readonly ids: readonly number[]; readonly drift?: { readonly at: number; readonly message: string } }> {
    const full = await server.render([...PREFIX, ...messages], { addGenerationPrompt: true }, signal);
    const at = firstDifference(full, this.#prefix);
    if (at === this.#prefix.length) return { ids: full.slice(at) };
    const roles = messages.map((m) => m.role).join(', ');
    const user = PREFIX[0] as TemplateMessage;
    const [alone, after] = await Promise.all([server.render([user], { addGenerationPrompt: false }, signal), server.render([user, ...messages], { addGenerationPrompt: true }, signal)]);
    const from = firstDifference(after, alone);
    return {
      ids: after.slice(from),
      drift: {
        at,
        message: `the chat template renders an assistant turn differently when ${roles} follow it (token ${at} of its ${this.#prefix.length}): ${from === alone.length ? `the ${roles} ids are rendered after a user turn instead` : `not prefix-stable after a user turn either (token ${from}): the ids are the template's from there`}, not an exact continuation`,
      },
    };
  }
}

function endsWith(ids: readonly number[], closing: readonly number[], k: number): boolean {
  for (let i = 0; i < k; i++) if (ids[ids.length - k + i] !== closing[i]) return false;
  return true;
}

/** One episode's sequence so far, and its turns. */
export class TokenTranscript {
  readonly #ids: number[] = [];
  /** Ids the environment added since the last turn. */
  #pending: number[] = [];
  #drift: TokenTurn['drift'];
  readonly turns: TokenTurn[] = [];

  get length(): number {
    return this.#ids.length;
  }

  /** Every id so far, the environment's not yet generated from included. */
  get ids(): readonly number[] {
    return this.#ids;
  }

  /** Ids the environment wrote (the first prompt, a tool result, a user's turn). */
  addEnv(ids: readonly number[], drift?: TokenTurn['drift']): void {
    for (const id of ids) this.#ids.push(id);
    for (const id of ids) this.#pending.push(id);
    if (drift && !this.#drift) this.#drift = drift;
  }

  /** A generation from the whole sequence so far (or a gold turn): its ids are appended as generated. */
  addTurn(completion: Completion, seed: number, extra: { readonly invalid?: string; readonly weightVersion?: number; readonly gold?: boolean; readonly sampling?: TokenTurn['sampling'] } = {}): TokenTurn {
    const { invalid } = extra;
    const version = completion.weight_version ?? extra.weightVersion;
    const turn: TokenTurn = {
      env_ids: this.#pending,
      prompt_length: this.#ids.length,
      token_ids: completion.token_ids,
      logprobs: completion.logprobs,
      text: completion.text,
      ...(completion.token_strs ? { token_strs: completion.token_strs } : {}),
      finish_reason: completion.finish_reason,
      stop_reason: completion.stop_reason,
      model: completion.model,
      seed,
      ...(extra.sampling ? { sampling: extra.sampling } : {}),
      ...(invalid !== undefined ? { invalid } : {}),
      ...(version !== undefined ? { weight_version: version } : {}),
      ...(extra.gold ? { gold: true as const } : {}),
      ...(this.#drift ? { drift: this.#drift } : {}),
    };
    for (const id of completion.token_ids) this.#ids.push(id);
    this.#pending = [];
    this.#drift = undefined;
    this.turns.push(turn);
    return turn;
  }
}
