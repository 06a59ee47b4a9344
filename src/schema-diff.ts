/**
 * `agentic-rl-toolkit/schema-diff`: what `agent schema-diff` does, as a library: two versions of
 * an env's schemas compared, each finding classified (breaking, risky, safe) by a named rule, and
 * reported as text, Markdown, GitHub annotations or SARIF.
 *
 * @module agentic-rl-toolkit/schema-diff
 */
export { schemaDiff, type SchemaDiffOptions } from './diff/schema-diff.js';
export { diffDefinitions, diffEnvFolders, diffSchema, diffSchemaFiles, type DiffKind, type DiffMode, type Finding } from './diff/diff.js';
export { compareSchemas, type RawFinding, type Severity } from './diff/compare.js';
export { buildReport, parseIgnoreFile, renderGithub, renderMarkdown, renderSarif, renderText, REPORT_VERSION, type DiffReport, type IgnoreEntry } from './diff/report.js';
export { RULE_SUMMARIES, RULES, type RuleInfo } from './diff/rules.js';
