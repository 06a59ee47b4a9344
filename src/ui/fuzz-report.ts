/** The closing report of `agent fuzz`: one block per failure signature, with its replay command. */
import type { CaseKind } from '../fuzz/case.js';
import type { FailureGroup, FuzzSummary } from '../fuzz/fuzz.js';

const KIND_ORDER: readonly string[] = ['valid', 'boundary-inside', 'boundary-outside', 'invalid', 'disabled'] satisfies readonly CaseKind[];

export function fuzzReport(summary: FuzzSummary, envDir: string): string {
  const lines: string[] = [];
  for (const s of summary.fixed) lines.push(`✓ fixed: ${s} (its saved case passes now and was removed)`);
  for (const g of summary.failures) lines.push('', ...failureLines(g, envDir));
  // A fixed order, so that reports of two runs read alike whatever case came first.
  const kinds = Object.entries(summary.by_kind)
    .sort(([a], [b]) => KIND_ORDER.indexOf(a) - KIND_ORDER.indexOf(b))
    .map(([k, n]) => `${n} ${k}`)
    .join(', ');
  lines.push(
    '',
    `${summary.failures.length === 0 ? 'clean' : `${summary.failures.length} failure${summary.failures.length === 1 ? '' : 's'}`}: ${summary.cases} cases (${kinds || 'saved only'}) in ${(summary.duration_ms / 1000).toFixed(1)} s, ${Math.round(summary.cases_per_second).toLocaleString('en-US')} cases/s, seed ${summary.seed}${summary.generator_misses > 0 ? `, ${summary.generator_misses} generator misses (retried)` : ''}${summary.interrupted ? ', interrupted' : ''}`,
  );
  const ungenerated = Object.entries(summary.ungenerated);
  if (ungenerated.length > 0) {
    const total = ungenerated.reduce((n, [, k]) => n + k, 0);
    lines.push(`warning: ${total} planned case${total === 1 ? '' : 's'} not run: no valid params could be drawn for ${ungenerated.map(([a, k]) => `${a} (${k})`).join(', ')}; their parameter schemas are beyond the value generator (agent fuzz --schema <file> --generate 5 shows it)`);
  }
  if (summary.cases === 0 && !summary.interrupted) lines.push('nothing was tested: no case ran (exit 1)');
  return `${lines.join('\n').trimStart()}\n`;
}

function failureLines(g: FailureGroup, envDir: string): string[] {
  return [
    `✗ ${g.signature}  (${g.count} case${g.count === 1 ? '' : 's'}${g.replayed ? ', still failing from a previous run' : ''})`,
    `  ${g.message}`,
    `  minimal input (${g.case.kind}${g.case.mutation ? `, ${g.case.mutation} at ${g.case.pointer}` : ''}${g.shrink_steps > 0 ? `, shrunk in ${g.shrink_steps} step${g.shrink_steps === 1 ? '' : 's'}` : ''}):`,
    `    params: ${JSON.stringify(g.case.params)}`,
    `    state:  ${JSON.stringify(g.case.state).slice(0, 300)}`,
    ...(g.file ? [`  replay: agent fuzz ${envDir} --replay ${g.file}`] : []),
  ];
}
