/**
 * A state as a tree: containers open on click (wide ones a hundred children at a time, so a map of
 * 2,000 reservations costs what is open), every field selectable (its history opens), the fields
 * the current commit changed marked, an invalid field marked red. Keyed by JSON pointer.
 */
import { useState } from 'preact/hooks';
import type { JsonValue } from '../../src/shared/json.js';
import { escapePointerToken } from '../../src/shared/json.js';
import { short } from '../format.js';

const PAGE = 100;

export interface TreeMarks {
  /** Pointers the current commit wrote (and their ancestors). */
  readonly changed: ReadonlySet<string>;
  readonly selected?: string;
  readonly invalid?: string;
}

export interface TreeProps {
  readonly marks: TreeMarks;
  readonly open: ReadonlySet<string>;
  readonly onToggle: (pointer: string) => void;
  readonly onSelect: (pointer: string) => void;
}

/** A pointer and each of its ancestors ('' included). */
export function withAncestors(pointer: string): string[] {
  const parts = pointer.split('/');
  return parts.map((_, i) => parts.slice(0, i + 1).join('/'));
}

function leadsTo(pointer: string, marks: TreeMarks): boolean {
  const on = (p: string | undefined): boolean => p !== undefined && (p === pointer || p.startsWith(`${pointer}/`));
  return on(marks.selected) || on(marks.invalid) || marks.changed.has(pointer);
}

function Node({ name, value, pointer, props }: { readonly name: string; readonly value: JsonValue; readonly pointer: string; readonly props: TreeProps }) {
  const [shown, setShown] = useState(PAGE);
  const { marks, open, onToggle, onSelect } = props;
  const container = value !== null && typeof value === 'object';
  const entries: [string, JsonValue][] = !container ? [] : Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
  const isOpen = container && open.has(pointer);
  const cls = ['node', marks.changed.has(pointer) ? 'changed' : '', marks.selected === pointer ? 'selected' : '', marks.invalid === pointer ? 'invalid' : ''].filter(Boolean).join(' ');
  return (
    <li>
      <span class={cls} data-pointer={pointer} onClick={() => (container ? onToggle(pointer) : onSelect(pointer))}>
        {container && <span class="caret">{isOpen ? '▾' : '▸'}</span>}
        <span class="key">{name}</span>
        {container ? <span class="muted"> {Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`}</span> : <span class={`val ${value === null ? 'null' : typeof value}`}>{short(value, 120)}</span>}
        <button class="hist" title="this field's history" data-history={pointer} onClick={(e) => (e.stopPropagation(), onSelect(pointer))}>
          history
        </button>
      </span>
      {isOpen && (
        <ul>
          {entries.map(([k, v], i) => {
            const child = `${pointer}/${escapePointerToken(k)}`;
            // Past the page, a child is still drawn when it leads to a marked field: a link to /reservations/X/status finds it among 2,000.
            if (i >= shown && !leadsTo(child, marks)) return null;
            return <Node key={k} name={k} value={v} pointer={child} props={props} />;
          })}
          {entries.length > shown && (
            <li>
              <button class="more" onClick={() => setShown(shown + PAGE * 10)}>
                {entries.length - shown} more…
              </button>
            </li>
          )}
        </ul>
      )}
    </li>
  );
}

export function JsonTree({ value, props }: { readonly value: JsonValue; readonly props: TreeProps }) {
  return (
    <ul class="tree">
      <Node name="(state)" value={value} pointer="" props={props} />
    </ul>
  );
}
