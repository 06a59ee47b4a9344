/** Stopping an agent program: SIGTERM to its group, the grace period kept even though its shell goes at once, then nothing left. */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Program } from './program.js';

let dir: string;
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('Program', () => {
  it('gives a program run by its shell the grace period to finish on SIGTERM, then kills what it left behind', async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'program-'));
    // Two commands, so the shell stays (it does not exec the last one) and dies at SIGTERM first.
    // The program saves its work 300 ms after SIGTERM; its child ignores SIGTERM and never ends.
    const program = Program.start(
      `node -e "process.on('SIGTERM', () => setTimeout(() => { require('fs').writeFileSync('saved', 'yes'); process.exit(0); }, 300)); require('fs').writeFileSync('ready', ''); setInterval(() => {}, 1000)" & sh -c 'trap "" TERM; echo $$ > child; exec sleep 30' 2>/dev/null & wait`,
      { cwd: dir, env: {}, graceMs: 5_000 },
    );
    await until(async () => (await readFile(path.join(dir, 'ready'), 'utf8').catch(() => undefined)) !== undefined && (await readFile(path.join(dir, 'child'), 'utf8').catch(() => '')) !== '');
    const child = Number((await readFile(path.join(dir, 'child'), 'utf8')).trim());
    await program.stop();
    expect(await readFile(path.join(dir, 'saved'), 'utf8')).toBe('yes');
    await until(async () => {
      const stat = await readFile(`/proc/${child}/stat`, 'utf8').catch(() => '');
      return stat === '' || /\) Z /.test(stat);
    });
  });
});

/** Polls `check` every 10 ms, for 5 s at most. */
async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('timed out waiting');
}
