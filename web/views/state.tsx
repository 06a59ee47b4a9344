/**
 * The state explorer: an episode's state at any seq (a slider over its commits), the commit that
 * made it as a diff, and the whole history of any field across the episode. The page replays the
 * episode's patches itself (the toolkit's own JSON Patch, with structural sharing), so moving the
 * slider over a 3 MB state costs the patch, not a request.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { HistoryAnswer } from '../../src/console/api-types.js';
import type { JsonValue } from '../../src/shared/json.js';
import { valueAtPointer } from '../../src/shared/json.js';
import { applyPatch, deepEqual, type Patch } from '../../src/state/patch.js';
import { useApi } from '../api.js';
import { clock, ms, short } from '../format.js';
import type { ViewProps } from '../nav.js';
import { EpisodePicker, useEpisodes } from './episode-picker.js';
import { JsonTree, withAncestors } from './json-tree.js';

interface Replayed {
  readonly states: readonly JsonValue[];
  /** The seq after commit i (`seqs[0]` = 0, the initial state). */
  readonly seqs: readonly number[];
}

function replay(h: HistoryAnswer): Replayed {
  const states: JsonValue[] = [h.initial];
  const seqs = [0];
  for (const c of h.commits) {
    states.push(applyPatch(states[states.length - 1] as JsonValue, c.patch as unknown as Patch));
    seqs.push(c.seq);
  }
  return { states, seqs };
}

function paths(patch: Patch): string[] {
  return patch.flatMap((op) => ('from' in op ? [op.path, op.from] : [op.path]));
}

export function StateView({ nav, go, version }: ViewProps) {
  const { page: episodes, episode, events } = useEpisodes(version, nav.episode);
  const { value: h, error } = useApi<HistoryAnswer>(episode === undefined ? undefined : `/api/episodes/${episode}/history`, events);
  const r = useMemo(() => (h ? replay(h) : undefined), [h]);
  const [pos, setPos] = useState<number | undefined>(undefined);
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set(['']));
  const [raw, setRaw] = useState(false);
  // Where a link asked to land: a seq, or the state as it stood at a time; else the last.
  useEffect(() => {
    if (!h || !r) return;
    if (nav.seq !== undefined) {
      let i = r.seqs.findIndex((s) => s >= (nav.seq as number));
      if (i === -1) i = r.seqs.length - 1;
      setPos(r.seqs[i] === nav.seq ? i : Math.max(0, i - 1));
    } else if (nav.time !== undefined) {
      setPos(h.commits.filter((c) => c.time <= (nav.time as number)).length);
    } else setPos(undefined);
  }, [h?.episode, nav.seq, nav.time, r !== undefined]);
  useEffect(() => {
    const wanted = [nav.pointer, nav.invalid].filter((p): p is string => p !== undefined);
    if (wanted.length > 0) setOpen((o) => new Set([...o, ...wanted.flatMap((p) => withAncestors(p).slice(0, -1))]));
  }, [nav.pointer, nav.invalid]);

  const at = r ? Math.min(pos ?? r.states.length - 1, r.states.length - 1) : 0;
  const state = r?.states[at];
  const commit = h && at > 0 ? h.commits[at - 1] : undefined;
  const patch = (commit?.patch ?? []) as unknown as Patch;
  const changed = useMemo(() => new Set(paths(patch).flatMap(withAncestors)), [commit]);
  const history = useMemo(() => {
    if (!r || !h || nav.pointer === undefined) return undefined;
    const out: { i: number; value: JsonValue | undefined }[] = [];
    let prev: JsonValue | undefined;
    r.states.forEach((s, i) => {
      const v = valueAtPointer(s, nav.pointer as string);
      if (i === 0 || (v !== prev && !deepEqual(v, prev))) out.push({ i, value: v });
      prev = v;
    });
    return out;
  }, [r, nav.pointer]);

  const toggle = (p: string): void =>
    setOpen((o) => {
      const next = new Set(o);
      if (next.has(p)) next.delete(p);
      else next.add(p);
      return next;
    });
  const select = (p: string): void => go({ view: 'state', ...(episode !== undefined ? { episode } : {}), seq: r?.seqs[at], pointer: p, ...(nav.invalid !== undefined ? { invalid: nav.invalid } : {}) });

  return (
    <div class="state">
      <div class="filters">
        <EpisodePicker page={episodes} episode={episode} onPick={(n) => go({ view: 'state', episode: n })} />
        {r && h && (
          <>
            <input type="range" min={0} max={r.states.length - 1} value={at} onInput={(e) => setPos(Number((e.target as HTMLInputElement).value))} aria-label="seq" class="slider" />
            <span class="mono" data-seq={r.seqs[at]}>
              seq {r.seqs[at]} / {r.seqs[r.seqs.length - 1]}
              {commit ? ` · ${clock(commit.time)} · +${ms(commit.time - (h.commits[0]?.time ?? commit.time))}` : ' · initial state'}
              {commit?.trace_id ? ` · ${commit.trace_id}` : ''}
            </span>
            {commit?.trace_id && (
              <button onClick={() => go({ view: 'timeline', episode: h.episode, trace: commit.trace_id })} title="this commit's trace in the timeline">
                trace →
              </button>
            )}
            <label>
              <input type="checkbox" checked={raw} onChange={(e) => setRaw((e.target as HTMLInputElement).checked)} /> raw JSON
            </label>
          </>
        )}
      </div>
      {error && <p class="bad">{error}</p>}
      {!h && !error && <p class="muted">{episode === undefined ? 'no episode yet' : 'loading…'}</p>}
      {state !== undefined && (
        <div class="columns">
          <section class="tree-box">
            {nav.invalid !== undefined && <p class="bad">marked: {nav.invalid || '(the whole state)'}, the field a violation names</p>}
            {raw ? <pre data-raw-state>{JSON.stringify(state, null, 2)}</pre> : <JsonTree value={state} props={{ marks: { changed, ...(nav.pointer !== undefined ? { selected: nav.pointer } : {}), ...(nav.invalid !== undefined ? { invalid: nav.invalid } : {}) }, open, onToggle: toggle, onSelect: select }} />}
          </section>
          <section class="side">
            <h2>{commit ? `Commit seq ${commit.seq}` : 'Initial state'}</h2>
            {commit ? (
              <table class="diff">
                <tbody>
                  {patch.map((op, i) => {
                    const before = r && at > 0 ? valueAtPointer(r.states[at - 1] as JsonValue, op.path) : undefined;
                    const after = valueAtPointer(state, op.path);
                    return (
                      <tr key={i} class="link" onClick={() => select(op.path)}>
                        <td class={`op ${op.op}`}>{op.op}</td>
                        <td class="mono">{'from' in op ? `${op.from} → ${op.path}` : op.path}</td>
                        <td>
                          {op.op !== 'add' && before !== undefined && <span class="old">{short(before, 60)}</span>}
                          {op.op !== 'remove' && after !== undefined && <span class="new">{short(after, 60)}</span>}
                        </td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            ) : (
              <p class="muted">move the slider to see each commit's patch</p>
            )}
            {nav.pointer !== undefined && history && h && (
              <div class="field-history" data-field={nav.pointer}>
                <h2>History of {nav.pointer || '(the whole state)'}</h2>
                <p class="muted">{history.length - 1} change{history.length === 2 ? '' : 's'} over {h.commits.length} commits</p>
                <table>
                  <tbody>
                    {history.map((c) => {
                      const cm = c.i > 0 ? h.commits[c.i - 1] : undefined;
                      return (
                        <tr key={c.i} class={`link${c.i === at ? ' selected' : ''}`} data-change-seq={r?.seqs[c.i]} onClick={() => setPos(c.i)}>
                          <td class="n">seq {r?.seqs[c.i]}</td>
                          <td class="mono">{cm ? clock(cm.time) : 'initial'}</td>
                          <td class="mono">{cm?.trace_id ?? ''}</td>
                          <td>{c.value === undefined ? <span class="muted">(absent)</span> : short(c.value, 80)}</td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              </div>
            )}
          </section>
        </div>
      )}
    </div>
  );
}
