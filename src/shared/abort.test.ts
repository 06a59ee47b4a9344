import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { linkedController } from './abort.js';

describe('linkedController', () => {
  it('links any number of children to a signal through one listener, and aborts the live ones with its reason', () => {
    const parent = new AbortController();
    const children = Array.from({ length: 1_000 }, () => linkedController(parent.signal));
    expect(getEventListeners(parent.signal, 'abort')).toHaveLength(1);
    // Disposed children are unlinked: the parent's abort no longer reaches them.
    for (const child of children.slice(0, 400)) child[Symbol.dispose]();
    const reason = new Error('stop');
    parent.abort(reason);
    expect(children.filter((c) => c.signal.aborted)).toHaveLength(600);
    expect(children[999]?.signal.reason).toBe(reason);
    expect(children[0]?.signal.aborted).toBe(false);
  });

  it('aborts when any of its parents does, at once when one already has; disposed, neither reaches it', () => {
    const a = new AbortController();
    const b = new AbortController();
    const both = linkedController(a.signal, undefined, b.signal);
    b.abort('b');
    expect(both.signal.reason).toBe('b');
    a.abort('a');
    expect(both.signal.reason).toBe('b');

    expect(linkedController(a.signal).signal.reason).toBe('a');

    const c = new AbortController();
    const d = new AbortController();
    const unlinked = linkedController(c.signal, d.signal);
    unlinked[Symbol.dispose]();
    c.abort();
    d.abort();
    expect(unlinked.signal.aborted).toBe(false);
  });
});
