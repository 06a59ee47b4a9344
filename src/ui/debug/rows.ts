/**
 * A list a pane pages through without copying it: a million-row list costs the window it shows,
 * not a filter and a copy per frame. A search materializes its matches once per change.
 */
export interface Rows<T> {
  readonly length: number;
  slice(start: number, end: number): T[];
}

export function arrayRows<T>(rows: readonly T[]): Rows<T> {
  return { length: rows.length, slice: (start, end) => rows.slice(start, end) };
}

/** The values of a map (in insertion order), then an array. */
export function mapThenArray<T>(first: ReadonlyMap<unknown, T>, then: readonly T[]): Rows<T> {
  return {
    length: first.size + then.length,
    slice(start, end) {
      const out: T[] = [];
      if (start < first.size) {
        let i = 0;
        for (const v of first.values()) {
          if (i >= end) break;
          if (i >= start) out.push(v);
          i++;
        }
      }
      return out.concat(then.slice(Math.max(0, start - first.size), Math.max(0, end - first.size)));
    },
  };
}
