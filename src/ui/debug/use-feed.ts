/**
 * Redraws a view from a debug feed at most every `frameMs` (12.5 fps by default, so that 10 fps holds with render time and timer jitter): events can come
 * by the thousand per second, and a frame per event would starve the terminal. A live feed also
 * ticks once per frame, so the ages of pending traces move. Everything is torn down on unmount.
 */
import { useEffect, useState } from 'react';
import type { DebugFeed, FeedStatus } from '../../replay/debug-feed.js';

export function useFeed(feed: DebugFeed, frameMs = 80): { readonly version: number; readonly status: FeedStatus; readonly now: number } {
  const [frame, setFrame] = useState(() => ({ version: feed.index.version, status: feed.status(), now: Date.now() }));
  useEffect(() => {
    let dirty = false;
    const off = feed.onChange(() => {
      dirty = true;
    });
    const timer = setInterval(() => {
      const status = feed.status();
      const live = status.phase === 'live' || status.phase === 'following';
      if (!dirty && !live) return;
      dirty = false;
      setFrame({ version: feed.index.version, status, now: Date.now() });
    }, frameMs);
    return () => {
      off();
      clearInterval(timer);
    };
  }, [feed, frameMs]);
  return frame;
}
