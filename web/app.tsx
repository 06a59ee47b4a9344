/** The console's frame: the run's title and feed status, the six views as tabs, and the selection they share. */
import { useCallback, useEffect, useState } from 'preact/hooks';
import { useFeedState } from './api.js';
import { count } from './format.js';
import type { Go, Nav, View } from './nav.js';
import { OverviewView } from './views/overview.js';
import { RewardsView } from './views/rewards.js';
import { StateView } from './views/state.js';
import { TimelineView } from './views/timeline.js';
import { TracesView } from './views/traces.js';
import { ValidationView } from './views/validation.js';

const TABS: readonly { readonly view: View; readonly label: string }[] = [
  { view: 'overview', label: 'Overview' },
  { view: 'traces', label: 'Traces' },
  { view: 'timeline', label: 'Timeline' },
  { view: 'state', label: 'State' },
  { view: 'rewards', label: 'Reward flow' },
  { view: 'validation', label: 'Validation' },
];

const PHASE: Readonly<Record<string, string>> = { indexing: 'indexing', following: 'following the folder', finished: 'finished', live: 'live', reconnecting: 'reconnecting…' };

export function App() {
  const { state, error } = useFeedState();
  const [nav, setNav] = useState<Nav>({ view: 'overview' });
  // A new view keeps the episode unless told otherwise; what was selected inside the old one is dropped.
  const go: Go = useCallback((next) => setNav((old) => ({ ...(old.episode !== undefined ? { episode: old.episode } : {}), ...next })), []);
  useEffect(() => {
    const onKey = (e: KeyboardEvent): void => {
      if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement || e.altKey || e.ctrlKey || e.metaKey) return;
      const tab = TABS[Number(e.key) - 1];
      if (tab) go({ view: tab.view });
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [go]);
  const version = state?.version;
  const props = { nav, go, version };
  return (
    <div class="app">
      <header>
        <span class="brand">agent debug</span>
        <nav>
          {TABS.map((t, i) => (
            <button key={t.view} class={nav.view === t.view ? 'tab active' : 'tab'} data-tab={t.view} title={`${t.label} (${i + 1})`} onClick={() => go({ view: t.view })}>
              {t.label}
            </button>
          ))}
        </nav>
        <span class="feed" data-phase={state?.phase ?? 'connecting'}>
          {error ? <span class="bad">{error}</span> : state ? `${PHASE[state.phase] ?? state.phase}${state.phase === 'indexing' && state.progress !== undefined ? ` ${Math.floor(state.progress * 100)} %` : ''} · ${count(state.events)} events` : 'connecting…'}
        </span>
      </header>
      {state?.phase === 'indexing' && <div class="progress" style={{ width: `${(state.progress ?? 0) * 100}%` }} />}
      <main data-view={nav.view}>
        {nav.view === 'overview' && <OverviewView {...props} />}
        {nav.view === 'traces' && <TracesView {...props} />}
        {nav.view === 'timeline' && <TimelineView {...props} />}
        {nav.view === 'state' && <StateView {...props} />}
        {nav.view === 'rewards' && <RewardsView {...props} />}
        {nav.view === 'validation' && <ValidationView {...props} />}
      </main>
    </div>
  );
}
