/**
 * The sandboxes of an env's episodes (env.json `sandbox`). Each instance's episode has a workspace
 * of its own: made on its first sandboxed command, seeded from the env's `files` folder and then
 * the state's `files_from` object (a task's own files), kept across the episode's calls, wiped
 * when the instance is reset or released. Commands run in it through one {@link Sandbox} (its
 * limits, its bound on commands at once). After a call that ran a command, the workspace's
 * listing is written into the state (`listing_to`), so the state history, time travel, diffs and
 * the debug views see what each call did to the files.
 */
import { chown, cp, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { SandboxSpec } from '../schema/definition.js';
import { Sandbox, type SandboxLimits, type SandboxMechanism, type SandboxMode, type SandboxResult } from '../sandbox/sandbox.js';
import { SANDBOX_UID } from '../sandbox/bwrap.js';
import { fillTemplate } from '../sandbox/template.js';
import { listWorkspace, sameListing, type WorkspaceListing } from '../sandbox/workspace-listing.js';
import { AgentError, ToolError, describeError } from '../shared/errors.js';
import { isPlainObject, valueAtPointer, type JsonObject, type JsonValue } from '../shared/json.js';
import type { Patch } from '../state/patch.js';
import type { EpisodeSandbox, SandboxRunOptions, ToolContext } from './types.js';

/** Who asks for a workspace: a tool's call, or an agent program. */
type WorkspaceUser = Pick<ToolContext, 'instanceId' | 'state' | 'tool'>;

interface Workspace {
  readonly generation: number;
  /** The folder, once seeded. */
  dir?: Promise<string>;
}

export class EpisodeSandboxes implements AsyncDisposable {
  readonly mechanism: SandboxMechanism;
  readonly #spec: SandboxSpec;
  readonly #sandbox: Sandbox;
  readonly #root: string;
  readonly #workspaces = new Map<string, Workspace>();
  /** Bumped by every reset and release: a call of an earlier episode finds its workspace gone. */
  readonly #generations = new Map<string, number>();
  readonly #calls = new WeakMap<ToolContext, CallSandbox>();
  #made = 0;

  private constructor(spec: SandboxSpec, sandbox: Sandbox, root: string) {
    this.#spec = spec;
    this.#sandbox = sandbox;
    this.#root = root;
    this.mechanism = sandbox.mechanism;
  }

  /** Checks that sandboxes can be made here (SANDBOX_UNAVAILABLE, saying what is missing, if not): at env load, never at the first call. */
  static async open(spec: SandboxSpec, options: { readonly mode?: SandboxMode; readonly signal?: AbortSignal } = {}): Promise<EpisodeSandboxes> {
    const sandbox = await Sandbox.open({ ...(options.mode ? { mode: options.mode } : {}), ...(spec.allowHosts ? { allowHosts: spec.allowHosts } : {}), ...(options.signal ? { signal: options.signal } : {}) });
    try {
      return new EpisodeSandboxes(spec, sandbox, await mkdtemp(path.join(os.tmpdir(), 'agent-workspaces-')));
    } catch (err) {
      await sandbox[Symbol.asyncDispose]();
      throw err;
    }
  }

  /** The call's handle on its episode's sandbox (`ctx.sandbox`). */
  forCall(ctx: ToolContext): EpisodeSandbox {
    let call = this.#calls.get(ctx);
    if (!call) {
      call = new CallSandbox(this, ctx, this.#generations.get(ctx.instanceId) ?? 0);
      this.#calls.set(ctx, call);
    }
    return call;
  }

  /** A sandbox tool's executor: its templates filled with the call's params, its result the observation. */
  executor(command: readonly string[], stdin: string | undefined, limits: Partial<SandboxLimits> | undefined): (params: JsonObject, ctx: ToolContext) => Promise<unknown> {
    return async (params, ctx) => {
      const argv = command.map((t) => fillTemplate(t, params));
      const result = await this.forCall(ctx).run(argv, { ...(stdin !== undefined ? { stdin: fillTemplate(stdin, params) } : {}), ...(limits ? { limits } : {}) });
      return { observation: result as unknown as JsonValue };
    };
  }

  /**
   * A call's raw result with the workspace's new listing added to its patch, when the call ran a
   * command and the listing changed. The whole listing is replaced, so that two calls of one
   * episode at once never patch each other's entries.
   */
  async finish(ctx: ToolContext, raw: unknown): Promise<unknown> {
    const call = this.#calls.get(ctx);
    const to = this.#spec.listingTo;
    if (!call?.dir || to === null || !isPlainObject(raw)) return raw;
    const listing = await listWorkspace(await call.dir, ctx.signal);
    const before = valueAtPointer(ctx.state, to);
    if (isPlainObject(before) && sameListing(before as unknown as WorkspaceListing, listing)) return raw;
    const patch: Patch = [...(Array.isArray(raw['patch']) ? (raw['patch'] as Patch) : []), { op: 'add', path: to, value: listing as unknown as JsonValue }];
    return { ...raw, patch };
  }

  /** The instance's episode sandbox for code that drives the episode from outside (an agent program): its workspace is the tools'. */
  forInstance(instanceId: string, state: () => JsonValue): EpisodeSandbox {
    const generation = this.#generations.get(instanceId) ?? 0;
    const user: WorkspaceUser = { instanceId, tool: 'the agent program', get state() { return state(); } };
    return {
      mechanism: this.mechanism,
      run: async (argv, options = {}) => this.run(argv, await this.workspace(user, generation), options, options.signal),
    };
  }

  /** @internal The instance's workspace folder, made and seeded on first use; refused to a call of an episode since reset. */
  workspace(ctx: WorkspaceUser, generation: number): Promise<string> {
    const id = ctx.instanceId;
    if ((this.#generations.get(id) ?? 0) !== generation) throw new ToolError('TOOL_CANCELLED', ctx.tool, 'the episode whose workspace this call used is over');
    let ws = this.#workspaces.get(id);
    if (!ws) {
      ws = { generation };
      this.#workspaces.set(id, ws);
    }
    ws.dir ??= this.#seed(ctx);
    return ws.dir;
  }

  /** @internal */
  run(argv: readonly string[], dir: string, options: SandboxRunOptions, signal: AbortSignal | undefined): Promise<SandboxResult> {
    const { limits, signal: _given, ...rest } = options;
    return this.#sandbox.run({ ...rest, argv, workspace: dir, limits: { ...this.#spec.limits, ...limits }, ...(signal ? { signal } : {}) });
  }

  /** A new episode: the instance's workspace goes (a new one is made at its first command). */
  async reset(instanceId: string): Promise<void> {
    this.#generations.set(instanceId, (this.#generations.get(instanceId) ?? 0) + 1);
    const ws = this.#workspaces.get(instanceId);
    if (!ws) return;
    this.#workspaces.delete(instanceId);
    const dir = await ws.dir?.catch(() => undefined);
    if (dir) await removeFolder(dir);
  }

  /** The instance is gone: so is its workspace. */
  async release(instanceId: string): Promise<void> {
    await this.reset(instanceId);
    this.#generations.delete(instanceId);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#workspaces.clear();
    await this.#sandbox[Symbol.asyncDispose]();
    await removeFolder(this.#root);
  }

  async #seed(ctx: WorkspaceUser): Promise<string> {
    const dir = path.join(this.#root, `w${++this.#made}`);
    await mkdir(dir);
    try {
      if (this.#spec.files !== undefined) await cp(this.#spec.files, dir, { recursive: true });
      if (this.#spec.filesFrom !== undefined) await writeSeedFiles(dir, valueAtPointer(ctx.state, this.#spec.filesFrom), this.#spec.filesFrom, ctx.tool);
      // An unprivileged uid (no cgroups here) must own what it is to change.
      if (this.mechanism.limits === 'uid-rlimit' && process.getuid?.() === 0) await chownTree(dir);
    } catch (err) {
      await removeFolder(dir);
      throw err instanceof AgentError ? err : new ToolError('TOOL_FAILED', ctx.tool, `could not seed the episode's workspace: ${describeError(err)}`, { cause: err });
    }
    return dir;
  }
}

/**
 * Removes a workspace. A command killed a moment ago (a run interrupted) may still be writing into
 * it while it goes (ENOTEMPTY): retried, and left for the OS's temp cleanup if it still will not
 * go — never the run's failure.
 */
async function removeFolder(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }).catch(() => undefined);
}

/** The files of `files_from`: each a relative path inside the workspace and a text. */
async function writeSeedFiles(dir: string, files: JsonValue | undefined, pointer: string, tool: string): Promise<void> {
  if (files === undefined) return;
  if (!isPlainObject(files)) throw new ToolError('TOOL_FAILED', tool, `the state's ${pointer} (the workspace's files) is not an object of texts by path`);
  for (const [name, text] of Object.entries(files)) {
    const rel = path.posix.normalize(name);
    if (typeof text !== 'string' || rel.startsWith('/') || rel === '.' || rel.split('/').includes('..')) {
      throw new ToolError('TOOL_FAILED', tool, `the state's ${pointer}/${name.replace(/~/g, '~0').replace(/\//g, '~1')} is not a text at a path inside the workspace`, {
        hint: 'Name each file by a relative path without ".." and give its text.',
      });
    }
    const file = path.join(dir, rel);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, text);
  }
}

async function chownTree(dir: string): Promise<void> {
  await chown(dir, SANDBOX_UID, SANDBOX_UID);
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    await chown(path.join(entry.parentPath, entry.name), SANDBOX_UID, SANDBOX_UID);
  }
}

/** One call's handle on its episode's sandbox: remembers that it ran something, so that the call's listing is taken. */
class CallSandbox implements EpisodeSandbox {
  readonly #owner: EpisodeSandboxes;
  readonly #ctx: ToolContext;
  readonly #generation: number;
  /** The workspace, once the call ran a command in it. */
  dir: Promise<string> | undefined;

  constructor(owner: EpisodeSandboxes, ctx: ToolContext, generation: number) {
    this.#owner = owner;
    this.#ctx = ctx;
    this.#generation = generation;
  }

  get mechanism(): SandboxMechanism {
    return this.#owner.mechanism;
  }

  async run(argv: readonly string[], options: SandboxRunOptions = {}): Promise<SandboxResult> {
    this.dir ??= this.#owner.workspace(this.#ctx, this.#generation);
    const dir = await this.dir;
    try {
      return await this.#owner.run(argv, dir, options, options.signal ? AbortSignal.any([this.#ctx.signal, options.signal]) : this.#ctx.signal);
    } catch (err) {
      if (this.#ctx.signal.aborted || err instanceof ToolError) throw err;
      throw new ToolError('TOOL_FAILED', this.#ctx.tool, describeError(err), { cause: err });
    }
  }
}
