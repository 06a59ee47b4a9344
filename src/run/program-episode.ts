/**
 * An episode driven by an agent program (`--policy cmd:'<command line>'`): the program is started
 * once for the episode, in a folder of its own (in the episode's sandbox, where the env declares
 * one: its workspace is the env's sandbox tools'), with the episode's endpoint in its environment:
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
import { Program, STDERR_TAIL_BYTES, type ProgramExit } from '../capture/program.js';
import { programCommandLine, type ProgramCommandLine } from '../capture/program-command.js';
import type { EpisodeSandbox } from '../tools/types.js';
import { describeError } from '../shared/errors.js';
import { PROGRAM_DEFAULTS } from '../shared/defaults.js';
import { cleanSum } from '../shared/float-sum.js';

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
        reward = cleanSum(reward + result.reward);
        if (result.done) endWith('done');
        else if (settled >= control.maxSteps) endWith('max_steps');
        const error = result.info.error;
        return error ? { content: textContent(`${error.code}: ${error.message}${error.hint ? ` (${error.hint})` : ''}`), isError: true } : { content: textContent(result.observation) };
      },
    };
    const endpoint = settings.server.open({ chat, tools, signal: ended.signal });
    const instruction = this.#task?.instruction ?? settings.instruction;
    const task = { ...(this.#task ? { id: this.#task.id } : {}), ...(instruction !== undefined ? { instruction } : {}), episode: control.episode, observation: control.agent.state };
    const env = {
      OPENAI_BASE_URL: endpoint.openaiBaseUrl,
      OPENAI_API_KEY: endpoint.token,
      ANTHROPIC_BASE_URL: endpoint.anthropicBaseUrl,
      ANTHROPIC_API_KEY: endpoint.token,
      AGENT_MCP_URL: endpoint.mcpUrl,
      AGENT_MODEL: chat.model,
      AGENT_TASK: JSON.stringify(task),
    };
    const timeoutMs = settings.timeoutMs ?? PROGRAM_DEFAULTS.timeoutMs;
    // The files the command names are the caller's: it runs elsewhere (its own folder, or the episode's sandbox).
    const command = programCommandLine(settings.command, process.cwd());
    const sandbox = control.agent.sandbox;
    const cwd = sandbox ? undefined : await mkdtemp(path.join(os.tmpdir(), `agent-program-${control.episode}-`));
    const program: RunningProgram = sandbox
      ? sandboxedProgram(sandbox, command, env, Number(new URL(settings.server.url).port), timeoutMs)
      : Program.start(command.line, { cwd: cwd as string, env, ...(settings.graceMs !== undefined ? { graceMs: settings.graceMs } : {}) });
    const onAbort = (): void => endWith('interrupted');
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    const timer = setTimeout(() => endWith('time_limit'), timeoutMs);
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
      if (cwd !== undefined) await rm(cwd, { recursive: true, force: true });
    }
    const result = end as { reason: EpisodeEndReason; error?: ErrorInfo };
    return { reason: result.reason, reward, ...(result.error ? { error: result.error } : {}) };
  }
}

type CallToolInput = { type: 'object'; properties?: Record<string, object> };

/** A started program: how it ended, and a way to end it. */
interface RunningProgram {
  readonly exited: Promise<ProgramExit>;
  stop(): Promise<unknown>;
}

/**
 * The program in the episode's sandbox (an env that declares one): its working folder is the
 * episode's workspace (the env's sandbox tools see what it writes), it sees the caller's folder and
 * the interpreters its command names read-only, and reaches the capture endpoint's port and
 * nothing else. Bounded as a program, not as a tool: its wall time, CPU seconds to match, and
 * room for an interpreter and its SDK. Stopping it kills it at once (no grace period: its
 * workspace outlives it).
 */
function sandboxedProgram(sandbox: EpisodeSandbox, command: ProgramCommandLine, env: Readonly<Record<string, string>>, port: number, timeoutMs: number): RunningProgram {
  const stop = new AbortController();
  const limits = { timeoutMs: timeoutMs + 5_000, cpuSeconds: Math.ceil(timeoutMs / 1_000), memoryMb: PROGRAM_DEFAULTS.sandboxMemoryMb, pids: PROGRAM_DEFAULTS.sandboxPids, outputBytes: STDERR_TAIL_BYTES };
  const exited = sandbox.run(['/bin/sh', '-c', command.line], { env, readOnly: command.readOnly, forwardPorts: [port], keep: 'tail', limits, signal: stop.signal }).then(
    (r): ProgramExit => ({ exit_code: r.exit_code, signal: r.signal, stderr_tail: r.stderr.trimEnd() }),
    (err: unknown): ProgramExit => (stop.signal.aborted ? { exit_code: null, signal: 'SIGKILL', stderr_tail: '' } : { exit_code: null, signal: null, stderr_tail: `the sandbox could not start it: ${describeError(err)}` }),
  );
  return {
    exited,
    stop: () => {
      stop.abort();
      return exited;
    },
  };
}

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
