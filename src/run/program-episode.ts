/**
 * An episode driven by an agent program (`--policy cmd:'<command line>'`): the program is started
 * once for the episode, in a folder of its own, with the episode's endpoint in its environment:
 *
 * - `OPENAI_BASE_URL`, `OPENAI_API_KEY` (and `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`): its model
 *   calls, answered and recorded as the episode's turns (chat-capture.ts);
 * - `AGENT_MCP_URL`: the env's tools over MCP, each call a step of the episode;
 * - `AGENT_MODEL`: the model name to ask for; `AGENT_TASK`: the task as JSON (its id, instruction
 *   and the env's initial state).
 *
 * The episode ends when the program exits (`policy_stop`; `policy_error` with its exit code, signal
 * and stderr's last line when it failed), when a step ends it (`done`, `max_steps`), when it asks
 * for a model call past its turn limit (`max_turns`: a program that floods the model), or at the
 * wall time limit (`time_limit`: one that never exits); the program's whole process group is then killed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { actionTool } from '../env/action-tool.js';
import type { ErrorInfo } from '../events/env-events.js';
import type { EpisodeEndReason } from '../events/run-events.js';
import type { DrivenEnd, EpisodeControl, EpisodeDriver } from './episode-runner.js';
import type { PolicyTask } from './policy.js';
import { ChatCapture, type CaptureUpstream } from '../capture/chat-capture.js';
import type { CaptureServer } from '../capture/capture-server.js';
import { textContent, type EpisodeTools } from '../capture/episode-mcp.js';
import { Program, type ProgramExit } from '../capture/program.js';
import { PROGRAM_DEFAULTS } from '../shared/defaults.js';

/** How far an agent program may go in one episode. */
export interface ProgramLimits {
  /** Wall time per episode (default `PROGRAM_DEFAULTS.timeoutMs`, 30 minutes): past it the program's process tree is killed and the episode ends `time_limit`. */
  readonly timeoutMs?: number;
  /** Model calls per episode (default `PROGRAM_DEFAULTS.maxTurns`): the one past it is refused and the episode ends `max_turns`. */
  readonly maxTurns?: number;
}

export interface ProgramSettings extends ProgramLimits {
  /** The command line, run by `/bin/sh -c`. */
  readonly command: string;
  readonly server: CaptureServer;
  readonly upstream: CaptureUpstream;
  /** The env's name (the MCP server's). */
  readonly envName: string;
  /** What the program is asked to do when no task says (the env's description). */
  readonly instruction?: string;
  /** Between SIGTERM and SIGKILL when the program is stopped. */
  readonly graceMs?: number;
}

export class ProgramEpisode implements EpisodeDriver {
  readonly #settings: ProgramSettings;
  readonly #task: PolicyTask | undefined;

  constructor(settings: ProgramSettings, task?: PolicyTask) {
    this.#settings = settings;
    this.#task = task;
  }

  async drive(control: EpisodeControl, signal: AbortSignal): Promise<DrivenEnd> {
    const settings = this.#settings;
    const ended = new AbortController();
    let reward = 0;
    let settled = 0;
    let end: { reason: EpisodeEndReason; error?: ErrorInfo } | undefined;
    let finish!: () => void;
    const over = new Promise<void>((resolve) => (finish = resolve));
    const endWith = (reason: EpisodeEndReason, error?: ErrorInfo): void => {
      if (end) return;
      end = { reason, ...(error ? { error } : {}) };
      ended.abort();
      finish();
    };
    const chat = new ChatCapture(settings.upstream, control.episode, {
      report: (call) => control.reportLlmCall(call),
      maxTurns: settings.maxTurns ?? PROGRAM_DEFAULTS.maxTurns,
      exhausted: () => endWith('max_turns'),
      // The inference server failed a request after its retries: the episode fails with that, not with whatever the program makes of its 502.
      failed: (err) => endWith('policy_error', { code: err.code, message: err.message, ...(err.hint ? { hint: err.hint } : {}) }),
    });
    const tools: EpisodeTools = {
      name: `agentic-rl-toolkit: ${settings.envName}`,
      list: () => (end ? [] : control.agent.availableActions().map(actionTool).map((t) => ({ name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), inputSchema: t.parameters as CallToolInput }))),
      call: async (name, args, callSignal) => {
        if (end) return refuse(`the episode is over (${end.reason})`);
        if (settled >= control.maxSteps) return refuse(`the episode has taken its ${control.maxSteps} steps`);
        const traceId = control.dispatch({ name, params: args });
        const result = await control.agent.resolve(traceId, { signal: AbortSignal.any([callSignal, ended.signal]) });
        await control.committed(ended.signal).catch(() => undefined);
        settled++;
        reward += result.reward;
        if (result.done) endWith('done');
        else if (settled >= control.maxSteps) endWith('max_steps');
        const error = result.info.error;
        return error ? { content: textContent(`${error.code}: ${error.message}${error.hint ? ` (${error.hint})` : ''}`), isError: true } : { content: textContent(result.observation) };
      },
    };
    const endpoint = settings.server.open({ chat, tools, signal: ended.signal });
    const cwd = await mkdtemp(path.join(os.tmpdir(), `agent-program-${control.episode}-`));
    const instruction = this.#task?.instruction ?? settings.instruction;
    const task = { ...(this.#task ? { id: this.#task.id } : {}), ...(instruction !== undefined ? { instruction } : {}), episode: control.episode, observation: control.agent.state };
    const program = Program.start(settings.command, {
      cwd,
      env: {
        OPENAI_BASE_URL: endpoint.openaiBaseUrl,
        OPENAI_API_KEY: endpoint.token,
        ANTHROPIC_BASE_URL: endpoint.anthropicBaseUrl,
        ANTHROPIC_API_KEY: endpoint.token,
        AGENT_MCP_URL: endpoint.mcpUrl,
        AGENT_MODEL: chat.model,
        AGENT_TASK: JSON.stringify(task),
      },
      ...(settings.graceMs !== undefined ? { graceMs: settings.graceMs } : {}),
    });
    const onAbort = (): void => endWith('interrupted');
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    const timer = setTimeout(() => endWith('time_limit'), settings.timeoutMs ?? PROGRAM_DEFAULTS.timeoutMs);
    void program.exited.then((exit) => endWith(...exitEnd(exit)));
    try {
      await over;
      // The step that ended the episode answers its call first; then the program goes, whatever it was doing.
      await new Promise((resolve) => setImmediate(resolve));
      await program.stop();
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      endpoint.close();
      await rm(cwd, { recursive: true, force: true });
    }
    const result = end as { reason: EpisodeEndReason; error?: ErrorInfo };
    return { reason: result.reason, reward, ...(result.error ? { error: result.error } : {}) };
  }
}

type CallToolInput = { type: 'object'; properties?: Record<string, object> };

function refuse(message: string): CallToolResult {
  return { content: textContent(message), isError: true };
}

/** A program that exited by itself: 0 ends the episode as the policy's stop; anything else is a policy error saying how it died. */
function exitEnd(exit: ProgramExit): [EpisodeEndReason, ErrorInfo?] {
  if (exit.exit_code === 0) return ['policy_stop'];
  const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.exit_code}`;
  const last = exit.stderr_tail.split('\n').at(-1);
  return ['policy_error', { code: 'POLICY_FAILED', message: `the agent program ${how}${last ? `: ${last}` : ''}`, ...(exit.stderr_tail ? { hint: `Its stderr ended with:\n${exit.stderr_tail.split('\n').slice(-10).join('\n')}` } : {}) }];
}
