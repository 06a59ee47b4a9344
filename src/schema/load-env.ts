/**
 * Loads an environment folder into an {@link EnvDefinition}. Two layouts:
 * - the article's: `state_schema.json`, `action_schema.json`, `reward_schema.json` (optional),
 *   a tools module (`tools.ts`, `tools.mts`, `tools.js` or `tools.mjs`) and optionally
 *   `initial_states.json`;
 * - an `env.json` manifest that points at (or inlines) the same, binds tools to subprocesses or
 *   HTTP endpoints, and sets their resilience policies.
 * Everything is validated before anything is used; all problems are reported together, each
 * with its file and JSON pointer.
 */
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { resolveEnvDir, SHIPPED_ENVS } from './shipped-envs.js';
import { checkSchema, validate, type JsonSchema } from './ajv.js';
import { parseActionDocument } from './actions.js';
import type { ActionDefinition, EnvDefinition, RewardSourceDefinition, SandboxSpec, ToolBinding, ToolPolicy } from './definition.js';
import type { SchemaDialect } from './dialects.js';
import { compileCondition, ConditionSyntaxError, jsonType, schemaDeclaresPath, typesAtPath, type CompiledCondition } from './enabled-if.js';
import { metaSchema } from './meta-schemas.js';
import { parseRewardDocument } from './rewards.js';
import { bindRewardSources } from './reward-bindings.js';
import { importMcpActions, mcpImportsOf, mcpServerSpecs, type McpToolLister } from './mcp-imports.js';
import { AgentError, ValidationError, type Issue } from '../shared/errors.js';
import { escapePointerToken, jsonCopy, isPlainObject, parsePointer, type JsonValue } from '../shared/json.js';
import type { SandboxLimits } from '../sandbox/sandbox.js';
import { templateNames } from '../sandbox/template.js';
import { parseAllowedHost, type AllowedHost } from '../sandbox/egress.js';

/** How an env folder is loaded: the action document's dialect, reward source rebindings, whether condition paths are checked, and an abort signal. */
export interface LoadEnvOptions {
  /** How to read tool parameter schemas; overrides the manifest's `dialect`. */
  readonly dialect?: SchemaDialect;
  readonly signal?: AbortSignal;
  /**
   * Bindings that replace the manifest's `reward_sources` entries of the same name, e.g. to
   * switch a source from a local module to an LLM judge for one run. Paths are relative to the env folder.
   */
  readonly rewardSources?: Readonly<Record<string, unknown>>;
  /** Refuse an enabled_if that reads a path the state schema does not declare (default true; schema-diff reports it instead). */
  readonly checkConditionPaths?: boolean;
  /** How `actions_from` lists an MCP server's tools (AgentEnv.open and schema-diff give the MCP client's). */
  readonly listMcpTools?: McpToolLister;
}

export const TOOL_MODULE_NAMES = ['tools.ts', 'tools.mts', 'tools.js', 'tools.mjs'];
const DEFAULT_TIMEOUT_MS = 30_000;

/** The env.json manifest (see schemas/env-manifest.schema.json). Strings are file names relative to the env folder. */
export interface EnvManifest {
  readonly name?: string;
  readonly description?: string;
  readonly state?: string | JsonSchema;
  /** Optional when `actions_from` imports them from MCP servers. */
  readonly actions?: string | readonly unknown[] | Readonly<Record<string, unknown>>;
  readonly mcp_servers?: Readonly<Record<string, unknown>>;
  readonly actions_from?: unknown;
  readonly rewards?: string | Readonly<Record<string, unknown>>;
  /** Where each reward source's values come from (see `RewardBinding`). */
  readonly reward_sources?: Readonly<Record<string, unknown>>;
  readonly initial_states?: string | readonly unknown[];
  readonly dialect?: SchemaDialect;
  readonly module?: string;
  readonly tool_defaults?: Readonly<Record<string, unknown>>;
  readonly tools?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  readonly sandbox?: Readonly<Record<string, unknown>>;
}

/** Read a JSON file; syntax errors become an issue with line and column. */
async function readJson(file: string, issues: Issue[], signal?: AbortSignal): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, { encoding: 'utf8', ...(signal ? { signal } : {}) });
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    issues.push({ file, pointer: '', message: `cannot read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` });
    return undefined;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const m = /position (\d+)/.exec((err as Error).message);
    const pos = m ? Number(m[1]) : undefined;
    const where = pos === undefined ? '' : ` at line ${text.slice(0, pos).split('\n').length}, column ${pos - text.lastIndexOf('\n', pos - 1)}`;
    issues.push({ file, pointer: '', message: `invalid JSON${where}: ${(err as Error).message}` });
    return undefined;
  }
}

/** A document given either inline in the manifest or as a file name relative to the env folder. */
async function documentOf(dir: string, manifestFile: string, field: string, value: unknown, issues: Issue[], signal?: AbortSignal): Promise<{ doc: unknown; file: string; pointer: string }> {
  if (typeof value === 'string') {
    const file = path.resolve(dir, value);
    return { doc: await readJson(file, issues, signal), file, pointer: '' };
  }
  return { doc: value, file: manifestFile, pointer: `/${field}` };
}

export async function loadEnvDefinition(dirArg: string, options: LoadEnvOptions = {}): Promise<EnvDefinition> {
  const dir = resolveEnvDir(dirArg);
  const info = await stat(dir).catch(() => undefined);
  if (!info?.isDirectory()) {
    throw new AgentError('DEFINITION_NOT_FOUND', `no environment folder at '${dirArg}', and no env of that name ships with the toolkit`, {
      hint: `Pass a folder that holds state_schema.json, action_schema.json and reward_schema.json (or an env.json manifest), or the name of a shipped env: ${SHIPPED_ENVS.join(', ')}.`,
    });
  }
  const issues: Issue[] = [];
  const { signal } = options;
  const manifestFile = path.join(dir, 'env.json');
  let manifest: EnvManifest;
  if (existsSync(manifestFile)) {
    const doc = await readJson(manifestFile, issues, signal);
    if (doc === undefined) throw invalid(dir, issues);
    const shape = validate(metaSchema('env-manifest'), doc, manifestFile);
    if (shape.length > 0) throw invalid(dir, shape);
    manifest = doc as EnvManifest;
  } else {
    const required = ['action_schema.json'];
    const missing = required.filter((f) => !existsSync(path.join(dir, f)));
    if (missing.length > 0) {
      throw new AgentError('DEFINITION_NOT_FOUND', `'${dirArg}' is not an environment folder: ${missing.join(', ')} is missing and there is no env.json`, {
        hint: 'An env folder holds state_schema.json, action_schema.json, reward_schema.json and a tools module, or an env.json manifest.',
      });
    }
    manifest = {
      actions: 'action_schema.json',
      ...(existsSync(path.join(dir, 'state_schema.json')) ? { state: 'state_schema.json' } : {}),
      ...(existsSync(path.join(dir, 'reward_schema.json')) ? { rewards: 'reward_schema.json' } : {}),
      ...(existsSync(path.join(dir, 'initial_states.json')) ? { initial_states: 'initial_states.json' } : {}),
    };
  }

  return buildDefinition(manifest, dir, manifestFile, issues, options);
}

/**
 * Define an environment in code, with the same shape and validation as an env.json manifest
 * (schemas inline or as file names relative to `dir`).
 *
 * @example
 * const def = await defineEnv({ state: {...}, actions: [{ name: 'search', parameters: {...} }] });
 * await using env = await AgentEnv.create(def, { handlers: { search: async (p) => ({ observation: p }) } });
 */
export async function defineEnv(manifest: EnvManifest, options: LoadEnvOptions & { dir?: string } = {}): Promise<EnvDefinition> {
  const dir = path.resolve(options.dir ?? '.');
  const where = path.join(dir, '(inline env)');
  const shape = validate(metaSchema('env-manifest'), manifest, where);
  if (shape.length > 0) throw invalid(dir, shape);
  return buildDefinition(manifest, dir, where, [], options);
}

async function buildDefinition(manifest: EnvManifest, dir: string, manifestFile: string, issues: Issue[], options: LoadEnvOptions): Promise<EnvDefinition> {
  const warnings: Issue[] = [];
  const { signal } = options;
  // State schema.
  let stateSchema: JsonSchema = { type: 'object' };
  /** The state schema was read whole: checks that depend on it (enabled_if paths) mean something. */
  let stateRead = true;
  if (manifest.state !== undefined) {
    const before = issues.length;
    const { doc, file, pointer } = await documentOf(dir, manifestFile, 'state', manifest.state, issues, signal);
    if (doc !== undefined) {
      const stateIssues = checkSchema(doc, file, pointer);
      issues.push(...stateIssues);
      if (stateIssues.length === 0) stateSchema = doc as JsonSchema;
    }
    // A state schema that is not JSON, or not a schema, would make every enabled_if path look undeclared: one error, not a cascade.
    stateRead = issues.length === before;
  }
  const checkPaths = options.checkConditionPaths !== false && stateRead;

  // Actions.
  const dialect = options.dialect ?? manifest.dialect ?? 'json-schema';
  const actionsDoc = manifest.actions === undefined ? undefined : await documentOf(dir, manifestFile, 'actions', manifest.actions, issues, signal);
  const parsed = actionsDoc?.doc === undefined ? { actions: [], issues: [], warnings: [] } : parseActionDocument(actionsDoc.doc, { file: actionsDoc.file, pointer: actionsDoc.pointer, dialect });
  issues.push(...parsed.issues);
  warnings.push(...parsed.warnings);
  // Actions imported from MCP servers: their tools/list, as a list of MCP tools.
  const mcpServers = mcpServerSpecs(manifest.mcp_servers, dir);
  const imported = await importMcpActions(manifest.actions_from, mcpServers, manifestFile, issues, options.listMcpTools, signal);
  if (imported.tools.length > 0) {
    const fromMcp = parseActionDocument(imported.tools, { file: manifestFile, pointer: '/actions_from', dialect: 'json-schema' });
    issues.push(...fromMcp.issues);
    warnings.push(...fromMcp.warnings);
    const own = new Set(parsed.actions.map((a) => a.name));
    for (const a of fromMcp.actions) {
      if (own.has(a.name)) issues.push({ file: manifestFile, pointer: imported.origins.get(a.name)?.pointer ?? '/actions_from', message: `action '${a.name}' is imported from MCP server '${imported.origins.get(a.name)?.server}' and also declared in actions: rename or prefix the import` });
      else parsed.actions.push(a);
    }
  }

  // Rewards.
  const rewards = new Map<string, RewardSourceDefinition>();
  if (manifest.rewards !== undefined) {
    const { doc, file, pointer } = await documentOf(dir, manifestFile, 'rewards', manifest.rewards, issues, signal);
    if (doc !== undefined) {
      const r = parseRewardDocument(doc, file, pointer);
      issues.push(...r.issues);
      for (const s of r.sources) rewards.set(s.name, s);
    }
  }
  await bindRewardSources(manifest.reward_sources, rewards, { dir, file: manifestFile, issues, ...(signal ? { signal } : {}) });
  if (options.rewardSources) {
    const overrides = { reward_sources: options.rewardSources };
    const where = path.join(dir, '(reward source overrides)');
    const shape = validate(metaSchema('env-manifest'), { actions: [], ...overrides }, where);
    issues.push(...shape);
    if (shape.length === 0) await bindRewardSources(options.rewardSources, rewards, { dir, file: where, issues, ...(signal ? { signal } : {}) });
  }

  // Tool bindings and policies.
  const moduleFile = manifest.module !== undefined ? path.resolve(dir, manifest.module) : TOOL_MODULE_NAMES.map((n) => path.join(dir, n)).find((f) => existsSync(f));
  if (manifest.module !== undefined && moduleFile && !existsSync(moduleFile)) {
    issues.push({ file: manifestFile, pointer: '/module', message: `tools module '${manifest.module}' does not exist` });
  }
  const tools = manifest.tools ?? {};
  const declared = new Set(parsed.actions.map((a) => a.name));
  for (const name of Object.keys(tools)) {
    if (!declared.has(name)) issues.push({ file: manifestFile, pointer: `/tools/${escapePointerToken(name)}`, message: `configures tool '${name}', but no action of that name is declared` });
  }
  const defaults = policyOf(manifest.tool_defaults ?? {});
  const sandbox = manifest.sandbox ? sandboxOf(manifest.sandbox, dir, stateSchema, manifestFile, issues) : undefined;

  const actions = new Map<string, ActionDefinition>();
  for (const a of parsed.actions) {
    const cfg = tools[a.name] ?? {};
    const cfgPointer = `/tools/${escapePointerToken(a.name)}`;
    const policy: ToolPolicy = { timeoutMs: DEFAULT_TIMEOUT_MS, ...defaults, ...policyOf(cfg) };
    if ('action' in (policy.fallback ?? {})) {
      const target = (policy.fallback as { action: string }).action;
      if (!declared.has(target) || target === a.name) {
        issues.push({ file: manifestFile, pointer: `${cfgPointer}/fallback/action`, message: `fallback action '${target}' ${target === a.name ? 'is the action itself' : 'is not declared'}` });
      }
    }
    const enabledSource = typeof cfg['enabled_if'] === 'string' ? cfg['enabled_if'] : a.enabledIf;
    const enabledPointer = typeof cfg['enabled_if'] === 'string' ? { file: manifestFile, pointer: `${cfgPointer}/enabled_if` } : { file: a.source.file, pointer: `${a.source.pointer}/enabled_if` };
    let enabledIf: CompiledCondition | undefined;
    if (enabledSource !== undefined) {
      try {
        enabledIf = compileCondition(enabledSource);
        for (const p of checkPaths ? enabledIf.paths : []) {
          if (!schemaDeclaresPath(stateSchema, p)) {
            issues.push({ ...enabledPointer, message: `enabled_if reads '${p.join('.')}', which the state schema does not declare: add it to state_schema.json or fix the path` });
          }
        }
        // A comparison whose sides can never have the same type is always false (or always true with !=): a typo, not a rule.
        for (const c of checkPaths ? enabledIf.comparisons : []) {
          const types = c.literal === null ? undefined : typesAtPath(stateSchema, c.path);
          const literal = jsonType(c.literal);
          if (types && !types.has(literal)) {
            issues.push({ ...enabledPointer, message: `enabled_if compares '${c.path.join('.')}' (${[...types].filter((t) => t !== 'number' || !types.has('integer')).join(' or ')} in the state schema) with ${JSON.stringify(c.literal)} (a ${literal}) using '${c.op}': it can never match; quote or unquote the literal, or fix the path` });
          }
        }
      } catch (err) {
        if (!(err instanceof ConditionSyntaxError)) throw err;
        issues.push({ ...enabledPointer, message: `enabled_if ${JSON.stringify(enabledSource)}: ${err.message}` });
      }
    }
    const origin = imported.origins.get(a.name);
    if (typeof cfg['mcp'] === 'string' && !mcpServers.has(cfg['mcp'])) issues.push({ file: manifestFile, pointer: `${cfgPointer}/mcp`, message: `no MCP server '${cfg['mcp']}' in mcp_servers` });
    const resultTo = { ...(typeof cfg['result_to'] === 'string' ? { resultTo: cfg['result_to'] } : {}), ...(typeof cfg['max_output_bytes'] === 'number' ? { maxOutputBytes: cfg['max_output_bytes'] } : {}) };
    if (cfg['result_to'] !== undefined && typeof cfg['mcp'] !== 'string' && !origin) issues.push({ file: manifestFile, pointer: `${cfgPointer}/result_to`, message: 'result_to applies to MCP tools only (set mcp, or import the action with actions_from)' });
    const binding: ToolBinding | undefined =
      typeof cfg['mcp'] === 'string' ? { kind: 'mcp', server: cfg['mcp'], tool: typeof cfg['tool'] === 'string' ? cfg['tool'] : a.name, ...resultTo } : origin ? { kind: 'mcp', server: origin.server, tool: origin.tool, imported: true, ...resultTo } : bindingOf(cfg, a.name, dir, moduleFile);
    if (binding?.kind === 'sandbox') {
      if (!sandbox) issues.push({ file: manifestFile, pointer: `${cfgPointer}/sandbox`, message: 'a sandbox tool needs the env\'s sandbox: add "sandbox": {} to env.json (its files, limits and where the listing goes)' });
      checkTemplates(binding, a.parameters, `${cfgPointer}/sandbox`, manifestFile, issues);
    }
    const { enabledIf: _source, ...rest } = a;
    actions.set(a.name, {
      ...rest,
      ...(enabledIf ? { enabledIf } : {}),
      policy,
      ...(binding ? { binding } : {}),
    });
  }

  // Initial states.
  const initialStates: JsonValue[] = [];
  if (manifest.initial_states !== undefined) {
    const { doc, file, pointer } = await documentOf(dir, manifestFile, 'initial_states', manifest.initial_states, issues, signal);
    if (doc !== undefined) {
      const list = Array.isArray(doc) ? doc : [doc];
      list.forEach((s, i) => {
        const at = Array.isArray(doc) ? `${pointer}/${i}` : pointer;
        const stateIssues = validate(stateSchema, s, file);
        if (stateIssues.length > 0) issues.push(...stateIssues.map((x) => ({ ...x, pointer: at + x.pointer, message: `initial state does not match the state schema: ${x.message}` })));
        else initialStates.push(jsonCopy(s as JsonValue));
      });
    }
  }

  if (issues.length > 0) throw invalid(dir, issues);
  const mcpImports = mcpImportsOf(manifest.actions_from);
  return {
    name: manifest.name ?? path.basename(dir),
    ...(manifest.description !== undefined ? { description: manifest.description } : {}),
    dir,
    stateSchema,
    actions,
    rewards,
    initialStates,
    warnings,
    ...(mcpServers.size > 0 ? { mcpServers } : {}),
    ...(sandbox ? { sandbox } : {}),
    ...(mcpImports.length > 0 ? { mcpImports: { imports: mcpImports, policy: { timeoutMs: DEFAULT_TIMEOUT_MS, ...defaults } } } : {}),
  };
}

function invalid(dir: string, issues: readonly Issue[]): ValidationError {
  return new ValidationError('DEFINITION_INVALID', `environment '${path.relative(process.cwd(), dir) || '.'}' is invalid`, issues, 'Fix each listed field; nothing was run.');
}

function policyOf(cfg: Record<string, unknown>): ToolPolicy {
  const p: { -readonly [K in keyof ToolPolicy]: ToolPolicy[K] } = {};
  if (typeof cfg['timeout_ms'] === 'number') p.timeoutMs = cfg['timeout_ms'];
  if (isPlainObject(cfg['retry'])) {
    const r = cfg['retry'];
    p.retry = { maxAttempts: (r['max_attempts'] as number | undefined) ?? 3, initialDelayMs: (r['initial_delay_ms'] as number | undefined) ?? 100, maxDelayMs: (r['max_delay_ms'] as number | undefined) ?? 5_000 };
  }
  if (isPlainObject(cfg['circuit_breaker'])) {
    const b = cfg['circuit_breaker'];
    p.circuitBreaker = { failures: b['failures'] as number, halfOpenAfterMs: (b['half_open_after_ms'] as number | undefined) ?? 10_000 };
  }
  if (typeof cfg['concurrency'] === 'number') p.concurrency = cfg['concurrency'];
  if (typeof cfg['queue'] === 'number') p.queue = cfg['queue'];
  if (isPlainObject(cfg['fallback'])) p.fallback = cfg['fallback'] as ToolPolicy['fallback'];
  if (cfg['isolate'] === 'worker' || cfg['isolate'] === 'none') p.isolate = cfg['isolate'];
  if (cfg['idempotent'] === true) p.idempotent = true;
  if (typeof cfg['cost_usd'] === 'number') p.costUsd = cfg['cost_usd'];
  return p;
}

function bindingOf(cfg: Record<string, unknown>, name: string, dir: string, moduleFile: string | undefined): ToolBinding | undefined {
  const cap = typeof cfg['max_output_bytes'] === 'number' ? { maxOutputBytes: cfg['max_output_bytes'] } : {};
  if (Array.isArray(cfg['command'])) {
    return {
      kind: 'subprocess',
      command: cfg['command'] as string[],
      cwd: path.resolve(dir, (cfg['cwd'] as string | undefined) ?? '.'),
      ...(isPlainObject(cfg['env']) ? { env: cfg['env'] as Record<string, string> } : {}),
      ...(cfg['persistent'] === true ? { persistent: true } : {}),
      ...cap,
    };
  }
  if (isPlainObject(cfg['sandbox'])) {
    const sb = cfg['sandbox'];
    const limits = isPlainObject(sb['limits']) ? limitsOf(sb['limits']) : undefined;
    return { kind: 'sandbox', command: sb['command'] as string[], ...(typeof sb['stdin'] === 'string' ? { stdin: sb['stdin'] } : {}), ...(limits ? { limits } : {}) };
  }
  if (typeof cfg['url'] === 'string') return { kind: 'http', url: cfg['url'], ...(isPlainObject(cfg['headers']) ? { headers: cfg['headers'] as Record<string, string> } : {}), ...cap };
  const module = typeof cfg['module'] === 'string' ? path.resolve(dir, cfg['module']) : moduleFile;
  if (module) return { kind: 'module', module, exportName: (cfg['export'] as string | undefined) ?? name };
  return undefined;
}

/** env.json's `limits` (snake case, as everywhere in env.json) as the sandbox's. */
function limitsOf(cfg: Record<string, unknown>): Partial<SandboxLimits> {
  const names = { cpu_s: 'cpuSeconds', memory_mb: 'memoryMb', pids: 'pids', file_size_mb: 'fileSizeMb', output_bytes: 'outputBytes', timeout_ms: 'timeoutMs' } as const;
  const out: { -readonly [K in keyof SandboxLimits]?: number } = {};
  for (const [from, to] of Object.entries(names)) if (typeof cfg[from] === 'number') out[to] = cfg[from];
  return out;
}

/** env.json's `sandbox`: its folder must exist, and the state schema must declare where its files come from and where the listing goes. */
function sandboxOf(cfg: Record<string, unknown>, dir: string, stateSchema: JsonSchema, file: string, issues: Issue[]): SandboxSpec {
  const listingTo = cfg['listing_to'] === undefined ? '/workspace' : (cfg['listing_to'] as string | null);
  const spec: SandboxSpec = {
    listingTo,
    limits: isPlainObject(cfg['limits']) ? limitsOf(cfg['limits']) : {},
    ...(typeof cfg['files'] === 'string' ? { files: path.resolve(dir, cfg['files']) } : {}),
    ...(typeof cfg['files_from'] === 'string' ? { filesFrom: cfg['files_from'] } : {}),
  };
  if (spec.files !== undefined && !existsSync(spec.files)) issues.push({ file, pointer: '/sandbox/files', message: `no folder '${String(cfg['files'])}' in the env folder` });
  const allowHosts: AllowedHost[] = [];
  (Array.isArray(cfg['allow_hosts']) ? (cfg['allow_hosts'] as string[]) : []).forEach((h, i) => {
    try {
      allowHosts.push(parseAllowedHost(h));
    } catch (err) {
      issues.push({ file, pointer: `/sandbox/allow_hosts/${i}`, message: (err as Error).message });
    }
  });
  for (const [field, pointer] of [['files_from', spec.filesFrom], ['listing_to', listingTo]] as const) {
    if (typeof pointer === 'string' && !schemaDeclaresPath(stateSchema, parsePointer(pointer))) {
      issues.push({
        file,
        pointer: `/sandbox/${field}`,
        message: `the state schema does not declare ${pointer}: declare it (${field === 'listing_to' ? 'an object with "files", each {"sha256", "size"} or {"link"}' : 'an object of text files by relative path'})${field === 'listing_to' ? ', or set listing_to to null to keep the listing out of the state' : ''}`,
      });
    }
  }
  return allowHosts.length > 0 ? { ...spec, allowHosts } : spec;
}

/** Each `{name}` of a sandbox tool's templates must be one of its parameters. */
function checkTemplates(binding: Extract<ToolBinding, { kind: 'sandbox' }>, parameters: JsonSchema, pointer: string, file: string, issues: Issue[]): void {
  const declared = isPlainObject(parameters) && isPlainObject(parameters['properties']) ? new Set(Object.keys(parameters['properties'])) : new Set<string>();
  const templates: [string, string][] = [...binding.command.map((arg, i): [string, string] => [`${pointer}/command/${i}`, arg]), ...(binding.stdin !== undefined ? [[`${pointer}/stdin`, binding.stdin] as [string, string]] : [])];
  for (const [at, template] of templates) {
    try {
      for (const name of templateNames(template)) {
        if (!declared.has(name)) issues.push({ file, pointer: at, message: `{${name}} is not a parameter of this action (it has ${declared.size > 0 ? [...declared].join(', ') : 'none'})` });
      }
    } catch (err) {
      issues.push({ file, pointer: at, message: (err as Error).message });
    }
  }
}
