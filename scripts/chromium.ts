/**
 * A headless Chromium for the tests that must see a page as a browser lays it out (the benchmark
 * report's charts): started on a free DevTools port, driven over the DevTools protocol with `ws`,
 * closed and its profile removed afterwards. No browser library: the few protocol calls a test
 * needs (open a page, evaluate, wait for a condition, click and hover with the mouse, the
 * requests made, screenshot) are below.
 *
 * The browser is `$CHROMIUM`, else `chromium`, `chromium-browser` or `google-chrome` on the PATH.
 * Where none is installed, `chromiumOrSkip` says how to get one; under CI it throws instead: a
 * browser test must never pass by not running.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import WebSocket from 'ws';

export interface Page {
  /** Loads a URL (file:// too) and waits for its load event. */
  goto(url: string): Promise<void>;
  /** Evaluates an expression in the page and returns its JSON value (a promise is awaited). */
  evaluate<T>(expression: string): Promise<T>;
  /** A PNG of the whole page, written to `file`. */
  screenshot(file: string): Promise<void>;
  /** Evaluates `expression` until it is truthy (every 50 ms, at most `timeoutMs`), and returns that value; throws naming `what` otherwise. */
  waitFor<T>(expression: string, what: string, timeoutMs?: number): Promise<T>;
  /** Clicks the first element matching `selector` (a real mouse press and release at its centre). */
  click(selector: string): Promise<void>;
  /** Moves the mouse over the first element matching `selector`. */
  hover(selector: string): Promise<void>;
  /** Every URL the page has requested so far (documents, scripts, fetches). */
  readonly requests: readonly string[];
}

const CANDIDATES = ['chromium', 'chromium-browser', 'google-chrome'];

/** The browser binary, or undefined when there is none. */
export function findChromium(): string | undefined {
  const explicit = process.env['CHROMIUM'];
  if (explicit) return explicit;
  return CANDIDATES.find((bin) => spawnSync('sh', ['-c', `command -v ${bin}`]).status === 0);
}

/** The browser, or a reason to skip (a developer machine without one); under CI its absence is an error. */
export function chromiumOrSkip(): { bin: string } | { skip: string } {
  const bin = findChromium();
  if (bin) return { bin };
  const how = 'install one (apt-get install chromium) or point $CHROMIUM at a Chrome';
  if (process.env['CI'] === 'true') throw new Error(`no Chromium found for the browser tests: ${how}`);
  return { skip: `browser tests skipped: no Chromium found; ${how}` };
}

/** Runs `fn` with a fresh page of a headless Chromium of `width` × `height`, then closes everything. */
export async function withPage<T>(bin: string, viewport: { width: number; height: number }, fn: (page: Page) => Promise<T>): Promise<T> {
  const profile = await mkdtemp(path.join(tmpdir(), 'agent-chromium-'));
  const child = spawn(bin, ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--remote-debugging-port=0', `--user-data-dir=${profile}`, 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  try {
    const cdp = await Cdp.connect(await devtoolsUrl(child));
    try {
      const { targetId } = await cdp.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank' });
      const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
      const page = (method: string, params: object = {}): Promise<unknown> => cdp.send(method, params, sessionId);
      await page('Page.enable');
      await page('Network.enable');
      const requests: string[] = [];
      cdp.on('Network.requestWillBeSent', sessionId, (params) => requests.push((params as { request: { url: string } }).request.url));
      await page('Emulation.setDeviceMetricsOverride', { ...viewport, deviceScaleFactor: 1, mobile: false });
      const evaluate = async <R>(expression: string): Promise<R> => {
        const r = (await page('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true })) as { result: { value: R }; exceptionDetails?: { text: string; exception?: { description?: string } } };
        if (r.exceptionDetails) throw new Error(`in the page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
        return r.result.value;
      };
      const centre = async (selector: string): Promise<{ x: number; y: number }> => {
        const at = await evaluate<{ x: number; y: number } | null>(`(() => { const el = document.querySelector(${JSON.stringify(selector)}); if (!el) return null; el.scrollIntoView({ block: 'center', inline: 'center' }); const r = el.getBoundingClientRect(); return { x: r.left + r.width / 2, y: r.top + r.height / 2 }; })()`);
        if (!at) throw new Error(`no element matches ${selector}`);
        return at;
      };
      return await fn({
        requests,
        goto: async (url) => {
          const loaded = cdp.once('Page.loadEventFired', sessionId);
          await page('Page.navigate', { url });
          await loaded;
        },
        evaluate,
        waitFor: async <R>(expression: string, what: string, timeoutMs = 15_000) => {
          const tries = Math.ceil(timeoutMs / 50);
          for (let i = 0; i < tries; i++) {
            const v = await evaluate<R>(expression);
            if (v) return v;
            await new Promise((r) => setTimeout(r, 50));
          }
          const seen = await evaluate<string>(`document.body?.innerText.slice(0, 400) ?? ''`).catch(() => '');
          throw new Error(`waited ${timeoutMs} ms for ${what}; the page shows: ${seen.replace(/\s+/g, ' ')}`);
        },
        click: async (selector) => {
          const { x, y } = await centre(selector);
          for (const type of ['mouseMoved', 'mousePressed', 'mouseReleased']) await page('Input.dispatchMouseEvent', { type, x, y, button: 'left', clickCount: 1 });
        },
        hover: async (selector) => {
          const { x, y } = await centre(selector);
          // From outside first: a pointer already resting there (a click before a redraw) would not enter it.
          await page('Input.dispatchMouseEvent', { type: 'mouseMoved', x: 0, y: 0 });
          await page('Input.dispatchMouseEvent', { type: 'mouseMoved', x, y });
        },
        screenshot: async (file) => {
          const { data } = (await page('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true })) as { data: string };
          await writeFile(file, Buffer.from(data, 'base64'));
        },
      });
    } finally {
      cdp.close();
    }
  } finally {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    // The whole group: Chromium's helpers (crashpad, zygote, renderers) outlive a killed parent and
    // keep writing into the profile while it is being removed.
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    }
    await exited;
    await rm(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  }
}

/** The browser's DevTools WebSocket URL, from the line it prints on stderr once it listens. */
function devtoolsUrl(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stderr as NodeJS.ReadableStream });
    const said: string[] = [];
    const done = (err?: Error, url?: string): void => {
      lines.close();
      child.off('exit', onExit);
      if (err) reject(err);
      else resolve(url as string);
    };
    const onExit = (code: number | null): void => done(new Error(`Chromium exited (${code}) before it listened:\n${said.slice(-10).join('\n')}`));
    child.once('exit', onExit);
    lines.on('line', (line) => {
      said.push(line);
      const m = /DevTools listening on (ws:\/\/\S+)/.exec(line);
      if (m) done(undefined, m[1]);
    });
  });
}

/** The DevTools protocol over one WebSocket: numbered requests and their replies, and events by name. */
class Cdp {
  #next = 1;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  readonly #waiters: { method: string; sessionId: string | undefined; resolve: () => void }[] = [];
  readonly #listeners: { method: string; sessionId: string | undefined; fn: (params: unknown) => void }[] = [];

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (raw) => {
      const msg = JSON.parse(String(raw)) as { id?: number; result?: unknown; error?: { message: string }; method?: string; sessionId?: string; params?: unknown };
      if (msg.id !== undefined) {
        const p = this.#pending.get(msg.id);
        this.#pending.delete(msg.id);
        if (msg.error) p?.reject(new Error(msg.error.message));
        else p?.resolve(msg.result);
        return;
      }
      for (const l of this.#listeners) if (l.method === msg.method && l.sessionId === msg.sessionId) l.fn(msg.params);
      const at = this.#waiters.findIndex((w) => w.method === msg.method && w.sessionId === msg.sessionId);
      if (at >= 0) this.#waiters.splice(at, 1)[0]?.resolve();
    });
    ws.on('close', () => {
      for (const p of this.#pending.values()) p.reject(new Error('the DevTools connection closed'));
      this.#pending.clear();
    });
  }

  static connect(url: string): Promise<Cdp> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { perMessageDeflate: false });
      ws.once('open', () => resolve(new Cdp(ws)));
      ws.once('error', reject);
    });
  }

  send<T>(method: string, params: object = {}, sessionId?: string): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  }

  once(method: string, sessionId?: string): Promise<void> {
    return new Promise((resolve) => this.#waiters.push({ method, sessionId, resolve }));
  }

  on(method: string, sessionId: string | undefined, fn: (params: unknown) => void): void {
    this.#listeners.push({ method, sessionId, fn });
  }

  close(): void {
    this.ws.close();
  }
}
