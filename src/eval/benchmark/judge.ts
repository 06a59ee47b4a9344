/**
 * `agent benchmark --judge llm:<model>`: a model the suite's own checks may ask (τ²-bench's
 * natural-language assertions), served as the `llm:` policy's models are (`--llm-base-url`, else
 * the provider named by the model), checked before the first episode. A check asks it through
 * {@link CheckContext.judge}; each episode's question is asked once, however often the episode is
 * scored (live for the progress line, then for the report).
 */
import { assertReachable } from '../../llm/reachable.js';
import { AgentError } from '../../shared/errors.js';
import { llmClient, llmModel, type LlmPolicySettings } from '../../run/llm-agent.js';

/** A judge's question: its instructions and the one message it judges; the answer is its text. */
export interface JudgePrompt {
  readonly system: string;
  readonly user: string;
}

/** What a module check is given beside the outcome. */
export interface CheckContext {
  /** The benchmark's judge (`--judge llm:<model>`), or undefined when none was named: the check then says what it could not score. */
  readonly judge?: (prompt: JudgePrompt) => Promise<string>;
  readonly signal?: AbortSignal;
}

/** What the judge cost, over the whole benchmark. */
export interface JudgeUsage {
  calls: number;
  input_tokens: number;
  output_tokens: number;
}

export interface BenchmarkJudge {
  /** The check context of one episode. */
  context(episode: number): CheckContext;
  readonly usage: JudgeUsage;
}

/** Enough for a verdict per assertion with its reasoning, on long lists. */
const JUDGE_MAX_TOKENS = 4096;

export async function benchmarkJudge(spec: string, llm: Omit<LlmPolicySettings, 'user'> | undefined, signal: AbortSignal | undefined): Promise<BenchmarkJudge> {
  const model = llmModel(spec);
  if (model === undefined) throw new AgentError('BAD_USAGE', `--judge '${spec}' is not llm:<model>`, { hint: 'Pass --judge llm:<model>, e.g. llm:gpt-4.1 (τ²-bench judges with gpt-4.1), served where --llm-base-url points.' });
  if (llm?.baseURL !== undefined) await assertReachable(llm.baseURL, signal);
  const client = await llmClient({
    model,
    ...(llm?.baseURL !== undefined ? { baseURL: llm.baseURL } : {}),
    ...(llm?.provider !== undefined ? { provider: llm.provider } : {}),
    ...(llm?.apiKeyEnv !== undefined ? { apiKeyEnv: llm.apiKeyEnv } : {}),
  });
  const usage: JudgeUsage = { calls: 0, input_tokens: 0, output_tokens: 0 };
  const asked = new Map<string, Promise<string>>();
  return {
    usage,
    context: (episode) => ({
      ...(signal ? { signal } : {}),
      judge: (prompt) => {
        const key = `${episode}\u0000${prompt.system}\u0000${prompt.user}`;
        let answer = asked.get(key);
        if (!answer) {
          answer = client.chat({ system: prompt.system, messages: [{ role: 'user', content: prompt.user }], maxTokens: JUDGE_MAX_TOKENS, temperature: 0, ...(signal ? { signal } : {}) }).then((res) => {
            usage.calls++;
            usage.input_tokens += res.inputTokens;
            usage.output_tokens += res.outputTokens;
            return res.text;
          });
          asked.set(key, answer);
        }
        return answer;
      },
    }),
  };
}
