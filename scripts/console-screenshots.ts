/**
 * Screenshots of the web console's views for the README (docs/web-console/*.png): each view on a
 * τ-bench airline benchmark run (gold policy, 50 tasks, 162 steps, 3 MB states) and on a weather
 * run with delayed rewards. `npm run screenshots` (needs Chromium: see scripts/chromium.ts).
 *   tsx scripts/console-screenshots.ts [out-dir]
 */
import { execFileSync } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConsoleServer } from '../src/console/console-server.js';
import { FolderFeed } from '../src/replay/folder-feed.js';
import { Run } from '../src/run/run.js';
import type { Action } from '../src/index.js';
import { chromiumOrSkip, withPage, type Page } from './chromium.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const out = path.resolve(process.argv[2] ?? path.join(ROOT, 'docs/web-console'));

function agent(args: string[]): void {
  execFileSync(process.execPath, [path.join(ROOT, 'bin/agent.js'), ...args], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
}

async function only(dir: string): Promise<string> {
  const [name] = await readdir(dir);
  if (!name) throw new Error(`no run folder in ${dir}`);
  return path.join(dir, name);
}

/** Opens the console on `runDir`, runs `shoot` on its page. */
export async function onConsole(bin: string, runDir: string, shoot: (page: Page, url: string) => Promise<void>): Promise<void> {
  await using feed = await FolderFeed.open(runDir, { follow: false });
  await feed.ready();
  await using server = await ConsoleServer.start({ feed, runDir });
  await withPage(bin, { width: 1400, height: 860 }, async (page) => {
    await page.goto(server.url);
    await page.waitFor(`document.querySelector('.feed')?.textContent.includes('finished')`, 'the feed to load');
    await shoot(page, server.url);
  });
}

/** The weather env with a slow judge (50–900 ms) and a 500 ms deadline: rewards that arrive, come late, or are imputed. */
async function slowWeather(dir: string): Promise<string> {
  const env = path.join(dir, 'slow-weather');
  await cp(path.join(ROOT, 'fixtures/weather'), env, { recursive: true });
  const schema = JSON.parse(await readFile(path.join(env, 'reward_schema.json'), 'utf8')) as { properties: Record<string, Record<string, unknown>> };
  Object.assign(schema.properties['llm_score'] as object, { delay_ms: 400, deadline_ms: 500, fallback: { strategy: 'historical_mean' } });
  await writeFile(path.join(env, 'reward_schema.json'), JSON.stringify(schema));
  await writeFile(
    path.join(env, 'slow-judge.ts'),
    `import { setTimeout } from 'node:timers/promises';\nimport type { RewardInput } from 'agentic-rl-toolkit';\nimport { verdict as rule } from './judges.js';\nexport async function score(input: RewardInput): Promise<number> {\n  await setTimeout(50 + ((input.step * 389 + input.episode * 151) % 850), undefined, { signal: input.signal });\n  return rule(input);\n}\n`,
  );
  const manifest = JSON.parse(await readFile(path.join(env, 'env.json'), 'utf8')) as { reward_sources: Record<string, unknown> };
  manifest.reward_sources['llm_score'] = { module: 'slow-judge.ts', export: 'score' };
  await writeFile(path.join(env, 'env.json'), JSON.stringify(manifest));
  return env;
}

async function main(): Promise<void> {
  const browser = chromiumOrSkip();
  if ('skip' in browser) throw new Error(browser.skip);
  const tmp = await mkdtemp(path.join(tmpdir(), 'agent-shots-'));
  try {
    agent(['benchmark', 'tau-bench/airline', '--policy', 'gold', '--out', path.join(tmp, 'tau')]);
    agent(['run', await slowWeather(tmp), '--episodes', '12', '--concurrency', '4', '--seed', '3', '--out', path.join(tmp, 'weather')]);
    // Planted defects hit on purpose: a patch over the state's maximum, params out of range, a crash.
    const moves: Action[] = [{ name: 'double_score', params: { points: 80 } }, { name: 'book_seats', params: { count: 11 } }, { name: 'greet', params: { name: 'Ada' } }, { name: 'book_seats', params: { count: 2 } }];
    const buggy = await Run.prepare({ env: path.join(ROOT, 'fixtures/buggy'), episodes: 3, maxSteps: 4, out: path.join(tmp, 'buggy'), policy: (obs) => moves[(obs.step + obs.episode) % moves.length] ?? null });
    await buggy.execute();
    await mkdir(out, { recursive: true });
    const shot = async (page: Page, name: string): Promise<void> => {
      await page.screenshot(path.join(out, `${name}.png`));
      console.log(`wrote ${path.relative(ROOT, path.join(out, `${name}.png`))}`);
    };
    const tau = await only(path.join(tmp, 'tau'));
    const steps = (await readFile(path.join(tau, 'trajectories.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { trace_id: string; action: string; params: { reservation_id?: string } });
    const cancel = steps.find((x) => x.action === 'cancel_reservation') as (typeof steps)[number];
    await onConsole(browser.bin, tau, async (page) => {
      await page.waitFor(`document.querySelector('.benchmark')`, 'the benchmark report');
      await shot(page, 'overview');
      await page.click('[data-tab=traces]');
      await page.waitFor(`document.querySelectorAll('.row').length > 10`, 'trace rows');
      await shot(page, 'traces');
      // A cancelled reservation, one of 2,000, and the history of its status.
      await page.click(`.row[data-trace="${cancel.trace_id}"]`);
      await page.waitFor(`document.querySelector('[data-open-state]')`, 'the trace in the timeline');
      await page.click('[data-open-state]');
      await page.waitFor(`document.querySelector('.diff tr')`, 'the commit');
      await page.click('.diff tr');
      const reservation = `/reservations/${cancel.params.reservation_id as string}`;
      await page.waitFor(`document.querySelector('.node.selected')?.dataset.pointer === ${JSON.stringify(reservation)}`, 'the reservation');
      await page.click(`.node[data-pointer="${reservation}"]`);
      await page.click(`.node[data-pointer="${reservation}/status"]`);
      await page.waitFor(`document.querySelector('.field-history')?.dataset.field === ${JSON.stringify(`${reservation}/status`)}`, 'the field history');
      await page.evaluate(`document.querySelector('.node.selected').scrollIntoView({ block: 'center' })`);
      await shot(page, 'state');
    });
    await onConsole(browser.bin, await only(path.join(tmp, 'weather')), async (page) => {
      await page.click('[data-tab=timeline]');
      await page.click('button[title="next episode"]');
      await page.waitFor(`document.querySelectorAll('.barbox').length > 0 && document.querySelector('.mk.late')`, 'timeline bars and a late reward');
      await page.hover('.barbox');
      await page.waitFor(`document.querySelector('.tooltip')`, 'the tooltip');
      await shot(page, 'timeline');
      await page.click('[data-tab=rewards]');
      await page.waitFor(`document.querySelector('.source')`, 'reward sources');
      await shot(page, 'rewards');
    });
    await onConsole(browser.bin, await only(path.join(tmp, 'buggy')), async (page) => {
      await page.click('[data-tab=validation]');
      await page.waitFor(`document.querySelector('[data-violation]')`, 'violations');
      await shot(page, 'validation');
    });
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
