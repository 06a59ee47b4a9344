/** Which hosts an allow-list admits, and how a bad entry is refused. */
import { describe, expect, it } from 'vitest';
import { hostAllowed, parseAllowedHost } from './egress.js';

describe('an allow-list of hosts', () => {
  it('admits a name on 80 and 443, a port when given, every name under a *.domain, and nothing else', () => {
    const list = ['pypi.org', '*.pythonhosted.org', '127.0.0.1:8000', '[::1]:9000'].map(parseAllowedHost);
    expect(hostAllowed(list, 'pypi.org', 443)).toBe(true);
    expect(hostAllowed(list, 'PyPI.org.', 80)).toBe(true);
    expect(hostAllowed(list, 'pypi.org', 22)).toBe(false);
    expect(hostAllowed(list, 'files.pythonhosted.org', 443)).toBe(true);
    expect(hostAllowed(list, 'pythonhosted.org', 443)).toBe(false);
    expect(hostAllowed(list, 'evilpythonhosted.org', 443)).toBe(false);
    expect(hostAllowed(list, 'pypi.org.evil.com', 443)).toBe(false);
    expect(hostAllowed(list, '127.0.0.1', 8000)).toBe(true);
    expect(hostAllowed(list, '127.0.0.1', 6379)).toBe(false);
    expect(hostAllowed(list, '::1', 9000)).toBe(true);
  });

  it('refuses an entry that is not a host, saying how to write one', () => {
    for (const bad of ['', 'http://pypi.org', 'a b', 'pypi.org:0', 'pypi.org:99999', 'a.*.org', '*']) {
      expect(() => parseAllowedHost(bad), bad).toThrow(/is not a host: write a name/);
    }
  });
});
