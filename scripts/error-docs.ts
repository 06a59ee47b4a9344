/**
 * What the table of error codes (src/shared/error-codes.ts) feeds: the codes table of
 * docs/reference/errors.md (between its `codes` markers) and the Python client's mapping
 * (clients/python/agentic_rl/_codes.py). `npm run docs:errors` rewrites both;
 * scripts/error-docs.test.ts fails when either is not what the table gives.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ERROR_CODES, type ErrorCodeInfo } from '../src/shared/error-codes.js';

const ROOT = path.resolve(import.meta.dirname, '..');
export const ERRORS_PAGE = path.join(ROOT, 'docs', 'reference', 'errors.md');
export const PYTHON_CODES = path.join(ROOT, 'clients', 'python', 'agentic_rl', '_codes.py');
const START = '<!-- codes: generated from src/shared/error-codes.ts by `npm run docs:errors` -->';
const END = '<!-- /codes -->';

const entries = (): [string, ErrorCodeInfo][] => Object.entries(ERROR_CODES);

/** The page with its codes table as the table gives it. */
export function renderErrorsPage(page: string): string {
  const at = page.indexOf(START);
  const end = page.indexOf(END);
  if (at < 0 || end < at) throw new Error(`${path.relative(ROOT, ERRORS_PAGE)} has no codes markers (${START} … ${END})`);
  const rows = entries().map(([code, i]) => `| \`${code}\` | ${i.meaning.replace(/\|/g, '\\|')} | ${i.exit} | ${i.retryable ? 'yes' : 'no'} | ${[i.store ? 'stops the run, resumable' : '', i.invalidAction ? 'an invalid action' : '', i.endReason ? `ends the episode ${i.endReason}` : '', i.stopsRun ? 'no more episodes start' : '', i.python ? `Python: \`${i.python}\`` : ''].filter(Boolean).join('; ')} |`);
  const table = ['| code | meaning | exit | retryable | also |', '|---|---|---|---|---|', ...rows].join('\n');
  return `${page.slice(0, at + START.length)}\n\n${table}\n\n${page.slice(end)}`;
}

/** The Python client's code → exception class table. */
export function renderPythonCodes(): string {
  const lines = entries()
    .filter(([, i]) => i.python !== undefined)
    .map(([code, i]) => `    "${code}": "${i.python ?? ''}",`);
  const retryable = entries()
    .filter(([, i]) => i.retryable)
    .map(([code]) => `    "${code}",`);
  return [
    '"""The server\'s error codes the client maps to its own exceptions, and those a retry may cure.',
    '',
    'Generated from src/shared/error-codes.ts by `npm run docs:errors`: edit the table there, not this file.',
    '"""',
    'from typing import FrozenSet, Mapping',
    '',
    'EXCEPTION_BY_CODE: Mapping[str, str] = {',
    ...lines,
    '}',
    '',
    'RETRYABLE: FrozenSet[str] = frozenset({',
    ...retryable,
    '})',
    '',
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  writeFileSync(ERRORS_PAGE, renderErrorsPage(readFileSync(ERRORS_PAGE, 'utf8')));
  writeFileSync(PYTHON_CODES, renderPythonCodes());
  console.log(`wrote ${path.relative(ROOT, ERRORS_PAGE)} and ${path.relative(ROOT, PYTHON_CODES)}`);
}
