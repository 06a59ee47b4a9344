/** What every pane is given: its screen area, whether it has the keyboard, and (for list panes) the index and the search. */
import type { RunIndex } from '../../replay/run-index.js';

export interface PaneArea {
  readonly width: number;
  readonly height: number;
  /** The pane has the keyboard (no search being typed, no help shown). */
  readonly active: boolean;
}

export interface IndexPaneProps extends PaneArea {
  readonly index: RunIndex<unknown>;
  /** The index's version when drawn: the index mutates in place, this says when it changed. */
  readonly version: number;
  /** The pane's `/` search. */
  readonly query: string;
}
