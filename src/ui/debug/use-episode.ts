/** An episode's events (or history), loaded from the feed and reloaded when new ones arrive; aborted on change or unmount. */
import { useEffect, useState } from 'react';
import type { DebugFeed } from '../../replay/debug-feed.js';

export type Loaded<T> = { readonly value: T; readonly error?: undefined } | { readonly value?: undefined; readonly error: string } | { readonly value?: undefined; readonly error?: undefined };

export function useEpisodeData<T>(feed: DebugFeed, episode: number | undefined, load: (feed: DebugFeed, episode: number, signal: AbortSignal) => Promise<T>): Loaded<T> {
  const [loaded, setLoaded] = useState<Loaded<T>>({});
  // How many events the episode has: a new one reloads it, a new event elsewhere does not.
  const size = episode === undefined ? 0 : (feed.index.episodes.get(episode)?.refs.length ?? 0);
  useEffect(() => {
    if (episode === undefined) return;
    const abort = new AbortController();
    load(feed, episode, abort.signal).then(
      (value) => {
        if (!abort.signal.aborted) setLoaded({ value });
      },
      (err: unknown) => {
        if (!abort.signal.aborted) setLoaded({ error: err instanceof Error ? err.message : String(err) });
      },
    );
    return () => abort.abort();
  }, [feed, episode, size, load]);
  return loaded;
}

/** The episode numbers the feed has seen, in order, and the one `delta` steps from `episode`. */
export function stepEpisode(episodes: Iterable<number>, episode: number | undefined, delta: number): number | undefined {
  const all = [...episodes].sort((a, b) => a - b);
  if (all.length === 0) return undefined;
  const i = episode === undefined ? -1 : all.indexOf(episode);
  return all[Math.max(0, Math.min(all.length - 1, (i === -1 ? 0 : i) + delta))];
}
