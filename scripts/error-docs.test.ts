/** The errors page and the Python client's mapping are what the table of codes gives: a code added or changed without `npm run docs:errors` fails here. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../src/shared/error-codes.js';
import { ERRORS_PAGE, PYTHON_CODES, renderErrorsPage, renderPythonCodes } from './error-docs.js';

describe('the table of error codes', () => {
  it('is what docs/reference/errors.md and the Python client say (run `npm run docs:errors` after changing it)', () => {
    const page = readFileSync(ERRORS_PAGE, 'utf8');
    expect(page).toBe(renderErrorsPage(page));
    expect(readFileSync(PYTHON_CODES, 'utf8')).toBe(renderPythonCodes());
  });

  it('lists every code once, each with its meaning', () => {
    const page = readFileSync(ERRORS_PAGE, 'utf8');
    for (const [code, info] of Object.entries(ERROR_CODES)) {
      expect(page.split('\n').filter((line) => line.startsWith(`| \`${code}\` |`)), code).toHaveLength(1);
      expect(info.meaning.length).toBeGreaterThan(20);
    }
  });
});
