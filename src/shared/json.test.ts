import { describe, expect, it } from 'vitest';
import { nestsDeeperThan } from './json.js';

describe('nestsDeeperThan', () => {
  it('counts brackets outside strings, at the limit and one past it', () => {
    expect(nestsDeeperThan('[[[1]]]', 3)).toBe(false);
    expect(nestsDeeperThan('[[[[1]]]]', 3)).toBe(true);
    expect(nestsDeeperThan('{"a":{"b":[{}]}}', 3)).toBe(true);
    // Brackets inside strings (escaped quotes included) are text.
    expect(nestsDeeperThan('{"a":"[[[[[\\"[[[[["}', 3)).toBe(false);
  });

  it('answers a text shorter than the limit without scanning it, and scans a long flat one to the end', () => {
    expect(nestsDeeperThan('[[[[', 4)).toBe(false);
    expect(nestsDeeperThan(`[${'1,'.repeat(5_000)}1]`, 4)).toBe(false);
    expect(nestsDeeperThan(`${'['.repeat(600)}${']'.repeat(600)}`)).toBe(true);
  });
});
