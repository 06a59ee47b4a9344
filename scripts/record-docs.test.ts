/** docs/reference/records.md is what the schemas give: a schema changed without `npm run docs:records` fails here. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { RECORD_DOCS, renderRecordDocs } from './record-docs.js';

describe('docs/reference/records.md', () => {
  const generated = renderRecordDocs();

  it('is generated from the schemas as they are now (run `npm run docs:records` after changing one)', () => {
    expect(readFileSync(RECORD_DOCS, 'utf8')).toBe(generated);
  });

  it('documents the fields a reader looks up, nested ones by path', () => {
    for (const field of ['`rewards.*.delay_ms`', '`rewards.*.expected_at`', '`rewards.*.deadline_at`', '`messages[].tool_calls`', '`tasks[].trials[].metrics`', '`observation.state_seq`']) expect(generated).toContain(field);
    // What the README once showed and the records never had.
    expect(generated).not.toMatch(/delayMs|arrivedAt/);
  });
});
