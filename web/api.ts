/**
 * The page's side of the console API: the token (taken from the URL's `#token=` fragment once,
 * then kept for this tab only), JSON requests to this same server, and the updates stream.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { FeedState } from '../src/console/api-types.js';

const KEY = 'agent-console-token';

function takeToken(): string {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(KEY, decodeURIComponent(m[1] as string));
    // Out of the address bar (and of anything the user copies from it).
    history.replaceState(null, '', location.pathname + location.search);
  }
  return sessionStorage.getItem(KEY) ?? '';
}

const token = takeToken();
const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  const res = await fetch(path, { headers, ...(signal ? { signal } : {}) });
  if (!res.ok) {
    const body = (await res.json().catch(() => ({}))) as { error?: string };
    throw new ApiError(res.status, body.error ?? `${path} answered ${res.status}`);
  }
  return (await res.json()) as T;
}

export function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** The feed's state, pushed by GET /api/updates (reconnected after a second when the stream drops). */
export function useFeedState(): { readonly state: FeedState | undefined; readonly error: string | undefined } {
  const [state, setState] = useState<FeedState | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(token ? undefined : 'no token: open the URL agent debug --web printed (with its #token= part)');
  useEffect(() => {
    const abort = new AbortController();
    let retry: number | undefined;
    const connect = async (): Promise<void> => {
      try {
        const res = await fetch('/api/updates', { headers, signal: abort.signal });
        if (!res.ok || !res.body) {
          const body = (await res.json().catch(() => ({}))) as { error?: string };
          throw new ApiError(res.status, body.error ?? `updates answered ${res.status}`);
        }
        setError(undefined);
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffered = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffered += value;
          const lines = buffered.split('\n');
          buffered = lines.pop() ?? '';
          const last = lines.filter((l) => l.trim() !== '').pop();
          if (last) setState(JSON.parse(last) as FeedState);
        }
        throw new Error('the console server closed the stream');
      } catch (err) {
        if (abort.signal.aborted) return;
        setError(err instanceof Error ? err.message : String(err));
        if (err instanceof ApiError && err.status === 401) return;
        retry = window.setTimeout(() => void connect(), 1_000);
      }
    };
    void connect();
    return () => {
      abort.abort();
      clearTimeout(retry);
    };
  }, []);
  return { state, error };
}

export type Loaded<T> = { readonly value?: T; readonly error?: string; readonly loading: boolean };

/**
 * GET `path` now and again whenever `version` moves, never with two requests in flight: an update
 * during a request is answered by one more request after it, however many updates came. So a page
 * keeps up with any rate of events by skipping versions, never by queueing them.
 */
export function useApi<T>(path: string | undefined, version: number | undefined): Loaded<T> {
  const [loaded, setLoaded] = useState<Loaded<T>>({ loading: path !== undefined });
  const current = useRef<{ path: string; abort: AbortController; busy: boolean; dirty: boolean } | undefined>(undefined);
  useEffect(() => {
    if (path === undefined) return;
    let c = current.current;
    if (c && c.path !== path) {
      c.abort.abort();
      c = undefined;
    }
    if (!c) {
      c = { path, abort: new AbortController(), busy: false, dirty: false };
      current.current = c;
      setLoaded((l) => ({ ...l, loading: true }));
    }
    const mine = c;
    const run = (): void => {
      mine.busy = true;
      mine.dirty = false;
      getJson<T>(path, mine.abort.signal)
        .then(
          (value) => {
            if (current.current === mine) setLoaded({ value, loading: false });
          },
          (err: unknown) => {
            if (current.current === mine && !mine.abort.signal.aborted) setLoaded((l) => ({ ...l, error: err instanceof Error ? err.message : String(err), loading: false }));
          },
        )
        .finally(() => {
          mine.busy = false;
          if (mine.dirty && !mine.abort.signal.aborted) run();
        });
    };
    if (mine.busy) mine.dirty = true;
    else run();
  }, [path, version]);
  useEffect(() => () => current.current?.abort.abort(), []);
  return loaded;
}
