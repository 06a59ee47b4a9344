/** NO_COLOR (https://no-color.org) turns colour off in every command, on a terminal too. */
import { execa } from 'execa';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { runAgent, scratch } from './testing.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());
afterEach(() => vi.unstubAllEnvs());

/** An SGR colour: foreground, background or dim/bold (cursor movement is not colour). */
const COLOUR = new RegExp(`${String.fromCharCode(27)}\\[(?:[349]\\d|1|2|22|39)m`);

describe('NO_COLOR', () => {
  it('schema-diff on a terminal: coloured, and plain with NO_COLOR', async () => {
    vi.stubEnv('NO_COLOR', '');
    expect((await runAgent(['schema-diff', 'fixtures/weather', 'fixtures/schema-pairs/weather-v2'], true)).stdout).toMatch(COLOUR);
    vi.stubEnv('NO_COLOR', '1');
    const plain = await runAgent(['schema-diff', 'fixtures/weather', 'fixtures/schema-pairs/weather-v2'], true);
    expect(plain.stdout).toContain('NOT compatible');
    expect(plain.stdout).not.toMatch(COLOUR);
  });

  it("the live run view (ink) on a terminal: coloured, and plain with NO_COLOR", async () => {
    const out = await tmp.dir('no-color-');
    // `script` gives the CLI a pseudo-terminal, so the live view renders as it would for a person.
    // Without CI in its environment (colour libraries turn colour off on an unknown CI) and with a
    // terminal size of its own (a pseudo-terminal opened without one is 0 columns wide).
    const { CI: _ci, ...base } = process.env;
    const view = async (env: Record<string, string>): Promise<string> =>
      (await execa('script', ['-qec', `stty cols 120 rows 40; node bin/agent.js run fixtures/weather --episodes 2 --max-steps 2 --out ${out} --tool-option latency_scale=0.01`, '/dev/null'], { env: { ...base, ...env, TERM: 'xterm-256color' }, extendEnv: false, stdin: 'ignore' })).stdout;
    expect(await view({ NO_COLOR: '' })).toMatch(COLOUR);
    const plain = await view({ NO_COLOR: '1' });
    expect(plain).toContain('episode 1');
    expect(plain).not.toMatch(COLOUR);
  });
});
