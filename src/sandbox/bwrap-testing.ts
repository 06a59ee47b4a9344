/** For the sandbox's tests: whether bwrap is here. Its absence fails the suite in CI; elsewhere the suite is skipped saying how to install it. */
import { execFileSync } from 'node:child_process';

export function bwrapForTests(what: string): boolean {
  try {
    execFileSync('bwrap', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    if (process.env['CI']) throw new Error('bubblewrap (bwrap) is required in CI and is not on PATH (.ci/run installs it: apt-get install bubblewrap)');
    console.warn(`skipping ${what}: bwrap is not on PATH (install it: apt-get install bubblewrap)`);
    return false;
  }
}
