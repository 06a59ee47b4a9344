import { render } from 'ink-testing-library';
import { describe, expect, it } from 'vitest';
import { FuzzPanel } from './fuzz-view.js';

describe('FuzzPanel', () => {
  it('shows progress, cases/s, fixed cases and failures so far', () => {
    const { lastFrame } = render(
      <FuzzPanel p={{ env: 'buggy', runs: 500, cases: 240, elapsedMs: 2_000, failures: { 'no-crash:greet:TOOL_CRASHED': 7, 'no-timeout:wait_for_partner:TOOL_TIMEOUT': 3 }, fixed: ['state-valid:double_score:STATE_INVALID'] }} />,
    );
    const frame = lastFrame() ?? '';
    expect(frame).toContain('agent fuzz · buggy · 240/500 cases · 120 cases/s · 2 failures');
    expect(frame).toContain('✓ fixed: state-valid:double_score:STATE_INVALID');
    expect(frame).toContain('✗ no-crash:greet:TOOL_CRASHED ×7');
  });

  it('says when nothing has failed', () => {
    const { lastFrame } = render(<FuzzPanel p={{ env: 'weather', runs: 10, cases: 10, elapsedMs: 1_000, failures: {}, fixed: [] }} />);
    expect(lastFrame()).toContain('0 failures');
  });
});
