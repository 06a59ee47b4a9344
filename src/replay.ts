/**
 * `agentic-rl-toolkit/replay`: run folders once written: read them, deliver late rewards into
 * them, compute their rewards again (a new reward log version), export them as trainer input (JSON
 * lines, Parquet, chat, token sequences), inspect a trace or a state, and replay a recorded episode.
 *
 * @module agentic-rl-toolkit/replay
 */
export { readRunFolder, type RunFolder } from './replay/run-reader.js';
export { RUN_FILES, type EpisodeRecord, type StateRecord, type TrajectoryRecord } from './replay/run-writer.js';
export { rewardEvent, rewardRecord, type RewardLogRecord } from './replay/reward-log.js';
export { deliverToRunFolder, openRunRewards, readManifest, rewardVersions, type FolderDelivery, type FolderDeliveryReport, type OpenRunOptions, type RunManifest, type RunRewards } from './replay/run-rewards.js';
export { rescoreRun, type RescoreOptions, type RescoreReport } from './eval/rescore.js';
export { exportRun, writeParquet, type ExportOptions, type ExportRecord, type StateMode } from './replay/export.js';
export { exportChat, writeChatParquet, type ChatExportOptions, type ChatRecord, type ChatTool, type ChatToolCall, type ChatTurn } from './replay/chat-export.js';
export { exportTokens, writeTokensParquet, type TokenRecord, type TokenSpan } from './replay/token-export.js';
export type { Replaced } from './shared/well-formed.js';
export { inspectField, inspectState, inspectTrace, type FieldChange, type StateReport, type TraceReport } from './replay/inspect.js';
export { recordedSteps, type RecordedStep } from './replay/recording.js';
export { diffStates } from './state/diff.js';
