/** Every schema violation: what broke (params, a tool's result, a patch of the state, a reward), where (pointer), the value; a patch's opens in the state explorer with the field marked. */
import { useState } from 'preact/hooks';
import type { ViolationPage } from '../../src/console/api-types.js';
import { query, useApi } from '../api.js';
import { clock, count, short } from '../format.js';
import type { ViewProps } from '../nav.js';

const KIND: Readonly<Record<string, string>> = { params: "an action's params", result: "a tool's result", patch: 'a patch (state schema)', reward: 'a reward' };

export function ValidationView({ go, version }: ViewProps) {
  const [q, setQ] = useState('');
  const [offset, setOffset] = useState(0);
  const { value: page, error } = useApi<ViolationPage>(`/api/violations${query({ q, offset, limit: 200 })}`, version);
  return (
    <div class="validation">
      <div class="filters">
        <input type="search" placeholder="search: words, or kind:patch code:STATE_INVALID ep:3 tool:x" value={q} onInput={(e) => (setQ((e.target as HTMLInputElement).value), setOffset(0))} aria-label="search" />
        <span class="muted" data-total={page?.total}>{page ? `${count(page.total)} violations` : ''}</span>
        {page && page.total > 200 && (
          <>
            <button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - 200))}>‹ newer</button>
            <button disabled={offset + 200 >= page.total} onClick={() => setOffset(offset + 200)}>older ›</button>
          </>
        )}
      </div>
      {error && <p class="bad">{error}</p>}
      {page?.total === 0 && <p class="muted">no schema violation: every params, result, patch and reward matched its schema</p>}
      {page && page.rows.length > 0 && (
        <table class="violations">
          <thead>
            <tr><th>time</th><th>what broke</th><th>code</th><th class="n">ep</th><th>trace</th><th>action</th><th>pointer</th><th>message</th><th>value</th></tr>
          </thead>
          <tbody>
            {page.rows.map((v, i) => (
              <tr
                key={i}
                class="link"
                data-violation={v.pointer}
                title={v.kind === 'patch' ? 'open the state with this field marked' : 'open the trace in the timeline'}
                onClick={() =>
                  v.episode === undefined
                    ? undefined
                    : v.kind === 'patch'
                      ? go({ view: 'state', episode: v.episode, time: v.time, invalid: v.pointer, pointer: v.pointer })
                      : go({ view: 'timeline', episode: v.episode, ...(v.trace_id !== undefined ? { trace: v.trace_id } : {}) })
                }
              >
                <td class="mono">{clock(v.time)}</td>
                <td>{KIND[v.kind] ?? v.kind}</td>
                <td class="bad">{v.code}</td>
                <td class="n">{v.episode ?? '–'}</td>
                <td class="mono">{v.trace_id ?? ''}</td>
                <td>{v.action ?? ''}</td>
                <td class="mono pointer">{v.pointer || '(whole)'}</td>
                <td>{v.message}</td>
                <td class="mono">{v.value !== undefined ? short(v.value, 40) : ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
