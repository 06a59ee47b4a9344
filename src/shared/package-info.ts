/**
 * The toolkit's own name, version and home, read once from its package.json: what reports that
 * name their producer (SARIF's driver) say, so they never disagree with the installed package.
 */
import { readFileSync } from 'node:fs';

export const TOOLKIT_NAME = 'agentic-rl-toolkit';
/** Where a user reads about the toolkit (package.json `homepage`). */
export const TOOLKIT_HOMEPAGE = 'https://www.npmjs.com/package/agentic-rl-toolkit';

/** The installed package's version; src/shared/ sits two levels below the root, dist/src/shared/ three. */
export const TOOLKIT_VERSION = ((): string => {
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === TOOLKIT_NAME && pkg.version) return pkg.version;
    } catch {
      // not at this level
    }
  }
  return 'unknown';
})();
