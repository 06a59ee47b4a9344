/**
 * A schema-diff report: findings after the ignore file, the verdict, and renderings as text,
 * JSON (schemas/schema-diff-report.schema.json), Markdown (a PR comment), GitHub workflow
 * annotations and SARIF 2.1.0.
 */
import { UsageError } from '../shared/errors.js';
import { TOOLKIT_HOMEPAGE, TOOLKIT_VERSION } from '../shared/package-info.js';
import type { Finding } from './diff.js';
import type { Severity } from './compare.js';

/** The version of the JSON report `agent schema-diff --format json` writes; it changes only when a field changes meaning. */
export const REPORT_VERSION = 1;

/** One entry of a schema-diff ignore file: the rule and location to accept, until when, and why. */
export interface IgnoreEntry {
  readonly rule: string;
  readonly location: string;
  readonly until?: string;
  readonly reason: string;
  readonly line: number;
}

/** A whole schema-diff: the findings kept, those ignored and why, the counts per severity, and whether it fails at `failOn`. */
export interface DiffReport {
  readonly schema_version: typeof REPORT_VERSION;
  readonly old: string;
  readonly new: string;
  readonly mode: string;
  readonly fail_on: Severity;
  /** True when nothing at or above `fail_on` remains. */
  readonly compatible: boolean;
  readonly counts: Readonly<Record<Severity, number>>;
  readonly findings: readonly Finding[];
  readonly ignored: readonly (Finding & { readonly ignore_reason: string })[];
  readonly unused_ignores: readonly IgnoreEntry[];
  readonly expired_ignores: readonly IgnoreEntry[];
}

const RANK: Readonly<Record<Severity, number>> = { info: 0, warning: 1, breaking: 2 };
const KIND_ORDER: Readonly<Record<Finding['kind'], number>> = { state: 0, action: 1, reward: 2 };

/**
 * Ignore file: one entry per line, `<rule-id> <location> <until|-> <reason…>`; `#` starts a comment.
 * `location` is the finding's location (e.g. `/actions/book/properties/seat/maximum`); `until` is an
 * ISO date after which the entry stops applying.
 */
export function parseIgnoreFile(text: string, file: string): IgnoreEntry[] {
  const entries: IgnoreEntry[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.replace(/#.*$/, '').trim();
    if (line === '') return;
    const [rule, location, until, ...reason] = line.split(/\s+/);
    if (!rule || location === undefined || until === undefined || reason.length === 0) {
      throw new UsageError(`${file}:${i + 1}: expected '<rule-id> <location> <until|-> <reason>'`, 'Example: required-added /actions/book/required 2027-01-31 the policy always sends it');
    }
    if (until !== '-' && !/^\d{4}-\d{2}-\d{2}$/.test(until)) throw new UsageError(`${file}:${i + 1}: '${until}' is not a date (YYYY-MM-DD) or '-'`);
    entries.push({ rule, location, ...(until !== '-' ? { until } : {}), reason: reason.join(' '), line: i + 1 });
  });
  return entries;
}

/** Turns findings into a report: applies the ignore entries, counts by severity and decides failure at `failOn`. */
export function buildReport(findings: readonly Finding[], options: { old: string; new: string; mode: string; failOn: Severity; ignores?: readonly IgnoreEntry[]; today?: string }): DiffReport {
  const today = options.today ?? new Date().toISOString().slice(0, 10);
  const ignores = options.ignores ?? [];
  const active = ignores.filter((e) => !e.until || e.until >= today);
  const used = new Set<IgnoreEntry>();
  const kept: Finding[] = [];
  const ignored: (Finding & { ignore_reason: string })[] = [];
  // Grouped by what they concern (state, each action, each reward source), most severe first within a group.
  const sorted = [...findings].sort((a, b) => KIND_ORDER[a.kind] - KIND_ORDER[b.kind] || (a.subject ?? '').localeCompare(b.subject ?? '') || RANK[b.severity] - RANK[a.severity] || a.location.localeCompare(b.location));
  for (const f of sorted) {
    const entry = active.find((e) => e.rule === f.rule && e.location === f.location);
    if (entry) {
      used.add(entry);
      ignored.push({ ...f, ignore_reason: entry.reason });
    } else kept.push(f);
  }
  const counts = { breaking: 0, warning: 0, info: 0 };
  for (const f of kept) counts[f.severity]++;
  return {
    schema_version: REPORT_VERSION,
    old: options.old,
    new: options.new,
    mode: options.mode,
    fail_on: options.failOn,
    compatible: !kept.some((f) => RANK[f.severity] >= RANK[options.failOn]),
    counts,
    findings: kept,
    ignored,
    unused_ignores: active.filter((e) => !used.has(e)),
    expired_ignores: ignores.filter((e) => e.until !== undefined && e.until < today),
  };
}

function witnessText(f: Finding): string {
  if (f.witness === undefined) return '';
  // enabled_if findings carry a state in which the action's availability differs, not a payload of one side.
  if (f.rule.startsWith('enabled-if')) return `witness state: ${JSON.stringify(f.witness)}`;
  return `witness (valid ${f.witness_valid_in}, invalid ${f.witness_valid_in === 'old' ? 'new' : 'old'}): ${JSON.stringify(f.witness)}`;
}

function group(f: Finding): string {
  return f.kind === 'state' ? 'state' : `${f.kind === 'action' ? 'action' : 'reward'} ${f.subject ?? ''}`.trim();
}

/** A report as terminal text, one finding per line, coloured by severity when `color` says how. */
export function renderText(r: DiffReport, color: (severity: Severity, s: string) => string = (_s, s) => s): string {
  const lines: string[] = [];
  let current = '';
  for (const f of r.findings) {
    const g = group(f);
    if (g !== current) {
      lines.push(`\n${g}`);
      current = g;
    }
    lines.push(`  ${color(f.severity, f.severity.toUpperCase().padEnd(8))} ${f.rule}  ${f.location}${f.instance_path ? `  (at ${f.instance_path})` : ''}`);
    lines.push(`           ${f.message}`);
    if (f.witness !== undefined) lines.push(`           ${witnessText(f)}`);
  }
  for (const e of r.unused_ignores) lines.push(`\nnote: ignore entry on line ${e.line} (${e.rule} ${e.location}) matched nothing`);
  for (const e of r.expired_ignores) lines.push(`note: ignore entry on line ${e.line} (${e.rule} ${e.location}) expired on ${e.until}`);
  lines.push(
    `\n${r.compatible ? 'compatible' : 'NOT compatible'}: ${r.counts.breaking} breaking, ${r.counts.warning} warning${r.counts.warning === 1 ? '' : 's'}, ${r.counts.info} info${r.ignored.length > 0 ? `, ${r.ignored.length} ignored` : ''} (${r.old} → ${r.new}, fail on ${r.fail_on})`,
  );
  return lines.join('\n').trimStart() + '\n';
}

/** A report as a Markdown table, for a pull-request comment. */
export function renderMarkdown(r: DiffReport): string {
  const head = r.compatible
    ? `### ✅ Schema change is compatible\n\n${r.counts.breaking} breaking, ${r.counts.warning} warnings, ${r.counts.info} info (\`${r.old}\` → \`${r.new}\`).`
    : `### ❌ Schema change breaks consumers\n\n**${r.counts.breaking} breaking**, ${r.counts.warning} warnings, ${r.counts.info} info (\`${r.old}\` → \`${r.new}\`).`;
  if (r.findings.length === 0) return `${head}\n`;
  const rows = r.findings.map((f) => `| ${f.severity === 'breaking' ? '🔴' : f.severity === 'warning' ? '🟡' : 'ℹ️'} ${f.severity} | \`${f.rule}\` | \`${f.location}\` | ${f.message.replace(/\|/g, '\\|')}${f.witness !== undefined ? `<br>witness: \`${JSON.stringify(f.witness).replace(/\|/g, '\\|')}\`` : ''} |`);
  return `${head}\n\n| severity | rule | where | why |\n|---|---|---|---|\n${rows.join('\n')}\n`;
}

/** A report as GitHub Actions workflow commands (`::error` / `::warning` annotations). */
export function renderGithub(r: DiffReport): string {
  const esc = (s: string): string => s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
  const prop = (s: string): string => esc(s).replace(/:/g, '%3A').replace(/,/g, '%2C');
  return r.findings
    .map((f) => {
      const level = f.severity === 'breaking' ? 'error' : f.severity === 'warning' ? 'warning' : 'notice';
      const file = f.file ? `file=${prop(f.file)},` : '';
      return `::${level} ${file}title=${prop(`${f.rule} ${f.location}`)}::${esc(`${f.message}${f.witness !== undefined ? `\n${witnessText(f)}` : ''}`)}`;
    })
    .join('\n')
    .concat(r.findings.length > 0 ? '\n' : '');
}

/** A report as SARIF 2.1.0, for GitHub code scanning and other static-analysis viewers. */
export function renderSarif(r: DiffReport, rules: Readonly<Record<string, string>>): string {
  const ruleIds = [...new Set(r.findings.map((f) => f.rule))].sort();
  const sarif = {
    $schema: 'https://json.schemastore.org/sarif-2.1.0.json',
    version: '2.1.0',
    runs: [
      {
        tool: {
          driver: {
            name: 'agent schema-diff',
            informationUri: TOOLKIT_HOMEPAGE,
            version: TOOLKIT_VERSION,
            rules: ruleIds.map((id) => ({ id, shortDescription: { text: rules[id] ?? id } })),
          },
        },
        results: r.findings.map((f) => ({
          ruleId: f.rule,
          ruleIndex: ruleIds.indexOf(f.rule),
          level: f.severity === 'breaking' ? 'error' : f.severity === 'warning' ? 'warning' : 'note',
          message: { text: `${f.message}${f.witness !== undefined ? ` ${witnessText(f)}` : ''}` },
          locations: [
            {
              ...(f.file ? { physicalLocation: { artifactLocation: { uri: f.file } } } : {}),
              logicalLocations: [{ fullyQualifiedName: f.location, kind: f.kind }],
            },
          ],
          properties: { kind: f.kind, instancePath: f.instance_path, ...(f.witness !== undefined ? { witness: f.witness, witnessValidIn: f.witness_valid_in } : {}) },
        })),
      },
    ],
  };
  return `${JSON.stringify(sarif, null, 2)}\n`;
}
