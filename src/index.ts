/**
 * The public API of the agentic-RL toolkit: the core (env, tools, state, rewards, schemas, run
 * folders). Importing it loads no ink, React or CLI code, so a trainer pays only for the core;
 * the terminal views are in `agentic-rl-toolkit/ui` and the command line in `agentic-rl-toolkit/cli`.
 */
export { AgentEnv, type EnvOptions } from './env/agent-env.js';
export {
  AgentInstance,
  type Action,
  type AvailableAction,
  type InstanceHooks,
  type PendingTrace,
  type ResolveOptions,
  type StepInfo,
  type StepResult,
} from './env/agent-instance.js';
export type { EnvEvent, EnvEventOf, EnvEventType, ErrorInfo, CallCost, RewardEntry, RewardEventType, RewardImputation, RewardStatus, TraceStatus } from './events/env-events.js';
export { EnvRewards } from './reward/env-rewards.js';
export { RewardLedger, type DeliveryResult, type RewardBasis, type RewardDelivery, type RewardEvent, type SlaCounts, type SourceSla, type StepRef } from './reward/ledger.js';
export type { RewardFunction, RewardInput, SettledStep } from './reward/evaluators.js';
export type { JudgeConfig, LlmProvider } from './schema/judge-config.js';
export { createLlmClient, type ChatMessage, type ChatRequest, type ChatResponse, type LlmClient, type LlmClientOptions } from './llm/client.js';

export type { EnvManifest, LoadEnvOptions } from './schema/load-env.js';
export { defineEnv, loadEnvDefinition } from './env/load-env.js';
export { parseActionDocument, type ParsedAction, type ParseResult } from './schema/actions.js';
export type { ActionDefinition, EnvDefinition, RewardBinding, RewardFallback, RewardScope, RewardSourceDefinition, ToolBinding, ToolPolicy } from './schema/definition.js';
export { compileCondition, ConditionSyntaxError, type CompiledCondition } from './schema/enabled-if.js';
export { compileSchema, validate, checkSchema, type JsonSchema } from './schema/ajv.js';
export { findUnsatisfiable, type Unsatisfiable } from './schema/satisfiable.js';
export { convertBfclSchema, type SchemaDialect } from './schema/dialects.js';

export { defineTool } from './tools/define-tool.js';
export { EXIT_RETRYABLE } from './tools/executors.js';
export type { ToolContext, ToolFactory, ToolHandler, ToolModuleConfig, ToolResult } from './tools/types.js';

export { MemoryStateStore } from './state/memory-store.js';
export { RedisStateStore, type RedisStateStoreOptions } from './state/redis-store.js';
export { archiveToFolder, readArchive } from './state/archive.js';
export { storeHealth, type StoreHealth, type StoreHealthOptions } from './state/redis-health.js';
export type { Delta, Snapshot, StateBounds, StatePoint, StateStore, StateStoreOptions, TrimResult } from './state/store.js';
export { applyPatch, type Patch, type PatchOperation } from './state/patch.js';
export { plainJson } from './state/wide-object.js';

export { assertTransition, canTransition, type LifecycleStatus } from './lifecycle/lifecycle.js';

export { AgentError, ToolError, UsageError, ValidationError, describeError, formatIssues, isAgentError, type ErrorCode, type Issue } from './shared/errors.js';
export { ManualClock, systemClock, type Clock } from './shared/clock.js';
export { Rng } from './shared/rng.js';
export { sleep } from './shared/abort.js';
export type { JsonObject, JsonValue } from './shared/json.js';

export { Run, type RunOptions } from './run/run.js';
export type { WorkerEpisodeOutcome } from './run/worker-run.js';
export type { RunSummary, SourceSummary } from './run/run-summary.js';
export type { EpisodeEndReason, RunConfig, RunEvent, SettledStepEvent, WorkerRow } from './events/run-events.js';
export { RolloutWorker, type WorkerEvent, type WorkerOptions, type WorkerSummary } from './run/rollout-worker.js';
export { EpisodeQueue, DEFAULT_QUEUE, type Claim, type WorkerHeartbeat } from './run/episode-queue.js';
export { serveWorkerHealth, type WorkerHealthOptions } from './server/worker-health.js';
export { RunMetrics, type MetricsPage } from './observe/prometheus.js';
export { otelConfig, type OtelConfig, type OtlpProtocol } from './observe/otel-config.js';
export type { TraceSummary } from './observe/otel-traces.js';
export type { TelemetrySummary } from './observe/telemetry.js';
export { decodeUtf8 } from './shared/utf8.js';
export { killProcessGroups } from './tools/process-starts.js';
export { isLoopback } from './server/http-guard.js';
export type { PendingCall, RecentReward, RunProgress, ToolStats } from './run/run-stats.js';
export { randomPolicy, loadPolicy, type Observation, type Policy, type PolicyContext, type PolicyTask } from './run/policy.js';
export { readRunFolder, type RunFolder } from './replay/run-reader.js';
export { RUN_FILES, type EpisodeRecord, type StateRecord, type TrajectoryRecord } from './replay/run-writer.js';
export { rewardRecord, rewardEvent, type RewardLogRecord } from './replay/reward-log.js';
export { diffStates } from './state/diff.js';
export { openRunRewards, deliverToRunFolder, readManifest, type FolderDelivery, type FolderDeliveryReport, type RunManifest, type RunRewards } from './replay/run-rewards.js';
export { exportRun, writeParquet, type ExportOptions, type ExportRecord, type StateMode } from './replay/export.js';
export { exportChat, writeChatParquet, type ChatRecord, type ChatTool, type ChatTurn, type ChatToolCall } from './replay/chat-export.js';

export { attachPlainReporter, summaryLines } from './ui/plain-reporter.js';
export { attachJsonReporter } from './ui/json-reporter.js';
export type { Output, RunSource } from './ui/run-source.js';

export { schemaDiff, type SchemaDiffOptions } from './diff/schema-diff.js';
export { diffSchema, diffDefinitions, diffEnvFolders, diffSchemaFiles, type DiffKind, type DiffMode, type Finding } from './diff/diff.js';
export { compareSchemas, type RawFinding, type Severity } from './diff/compare.js';
export { buildReport, parseIgnoreFile, renderGithub, renderMarkdown, renderSarif, renderText, REPORT_VERSION, type DiffReport, type IgnoreEntry } from './diff/report.js';
export { RULES, RULE_SUMMARIES, type RuleInfo } from './diff/rules.js';

export { Fuzzer, type FailureGroup, type FuzzEvent, type FuzzOptions, type FuzzSummary } from './fuzz/fuzz.js';
export { CHECKS, CHECK_DESCRIPTIONS, type CheckName, type Failure, type FuzzCase } from './fuzz/case.js';
export { generate, type GenerateOptions, type Generated } from './generate/generate.js';
export { mutants, boundaries, type Variant } from './fuzz/mutate.js';
export { generateSamples, type Sample } from './fuzz/samples.js';
export { fuzzReport } from './ui/fuzz-report.js';
export { recordedSteps, type RecordedStep } from './replay/recording.js';
export { runBenchmark, equalJson, type BenchmarkOptions, type BenchmarkReport, type TrialResult, type ToolMetrics, type EpisodeOutcome } from './eval/benchmark/benchmark.js';
export { compareWithBaseline, loadBaseline, type Baseline } from './eval/benchmark/baseline.js';
export { BUILT_IN_SUITES, listSuites, resolveSuite, type SuiteListing } from './eval/benchmark/suites.js';
export type { BaselineComparison, MetricComparison } from './eval/benchmark/report.js';
export { verlDataset, writeVerlParquet, VERL_INTERACTION, type VerlRow } from './eval/benchmark/verl-dataset.js';
export { loadSuite, type BenchmarkTask, type Suite, type SuccessCriterion } from './eval/benchmark/suite.js';
export type { Estimate } from './eval/benchmark/stats.js';
export { inspectTrace, inspectState, inspectField, type TraceReport, type StateReport, type FieldChange } from './replay/inspect.js';
export { RunIndex, type IndexedEvent, type TraceRow, type EpisodeRow, type RewardRow, type ViolationRow, type ViolationKind, type RunHeader } from './replay/run-index.js';
export { type DebugFeed, type FeedStatus, type EpisodeHistory, type Commit } from './replay/debug-feed.js';
export { FolderFeed, type FolderFeedOptions } from './replay/folder-feed.js';
export { AttachFeed, attachUrl } from './replay/attach-feed.js';
export { serveWebConsole, type WebConsoleOptions } from './console/web-console.js';
export { ConsoleServer, consoleUrl, type ConsoleServerOptions } from './console/console-server.js';
export { ConsoleRoutes, CONSOLE_OPEN_ROUTES, type ConsoleRoutesOptions } from './console/console-routes.js';
export { serveEnvOverStdio } from './run/mcp-serve.js';
export { serveEnv, type ServeOptions } from './serve/serve.js';
export { RESET_TOOL, STATE_URI, type McpServeOptions } from './run/mcp-serve-options.js';
