/**
 * The episode a view shows: a window of the episodes around it (a run can have tens of thousands),
 * previous / next, and a number to jump to any.
 */
import type { EpisodePage } from '../../src/console/api-types.js';
import { query, useApi } from '../api.js';

const WINDOW = 200;

/**
 * The episodes around the one wanted (the first seen when none is), and how many events that one
 * has: its views reload when that number moves, not on every event of the run.
 */
export function useEpisodes(version: number | undefined, wanted: number | undefined): { readonly page: EpisodePage | undefined; readonly episode: number | undefined; readonly events: number | undefined } {
  const { value: page } = useApi<EpisodePage>(`/api/episodes${query({ offset: Math.max(0, (wanted ?? 0) - WINDOW / 2), limit: WINDOW })}`, version);
  const episode = wanted ?? page?.rows[0]?.episode;
  return { page, episode, events: page?.rows.find((e) => e.episode === episode)?.events };
}

export function EpisodePicker({ page, episode, onPick }: { readonly page: EpisodePage | undefined; readonly episode: number | undefined; readonly onPick: (episode: number) => void }) {
  const rows = page?.rows ?? [];
  const i = rows.findIndex((e) => e.episode === episode);
  const last = page ? page.offset + rows.length >= page.total : true;
  const step = (d: number): void => {
    const next = rows[i + d];
    if (next) onPick(next.episode);
  };
  return (
    <span class="picker">
      <button onClick={() => step(-1)} disabled={i <= 0} title="previous episode">‹</button>
      <select value={episode ?? ''} onChange={(e) => onPick(Number((e.target as HTMLSelectElement).value))} aria-label="episode">
        {i === -1 && <option value={episode ?? ''}>{episode === undefined ? 'episode…' : `episode ${episode}`}</option>}
        {rows.map((e) => (
          <option key={e.episode} value={e.episode}>
            {`episode ${e.episode}${e.steps !== undefined ? ` · ${e.steps} steps` : ' · running'}${e.reason ? ` · ${e.reason}` : ''}`}
          </option>
        ))}
      </select>
      <button onClick={() => step(1)} disabled={i === -1 || (i >= rows.length - 1 && last)} title="next episode">›</button>
      {page && page.total > WINDOW && (
        <input class="narrow" type="number" min="0" placeholder="go to" aria-label="go to episode" onChange={(e) => onPick(Number((e.target as HTMLInputElement).value))} />
      )}
    </span>
  );
}
