/** Where the console is looking: one view, and what is selected across views (so they link). */
export type View = 'overview' | 'traces' | 'timeline' | 'state' | 'rewards' | 'validation';

export interface Nav {
  readonly view: View;
  readonly episode?: number;
  readonly trace?: string;
  /** The state explorer's seq (undefined: the episode's last). */
  readonly seq?: number;
  /** Open the state as it stood at this time (a violation's), when no seq is given. */
  readonly time?: number;
  /** The field selected in the state explorer: its history is shown. */
  readonly pointer?: string;
  /** A field to mark as invalid (a violation's pointer). */
  readonly invalid?: string;
  /** The traces view's filters, when another view opens it on a subset. */
  readonly tool?: string;
  readonly status?: string;
}

export type Go = (next: Partial<Nav> & { readonly view: View }) => void;

export interface ViewProps {
  readonly nav: Nav;
  readonly go: Go;
  /** The index's version: views refetch when it moves. */
  readonly version: number | undefined;
}
