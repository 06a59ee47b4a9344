/**
 * Text that UTF-8 can encode. A lone surrogate (half of a UTF-16 pair: a tool that cut a string in
 * the middle of an emoji, bytes decoded as UTF-16) survives JSON.stringify as an escape and
 * JSON.parse back, but no UTF-8 encoder takes it: Parquet writers put U+FFFD in its place,
 * Python's raises. Exports apply one rule whatever their format: each lone surrogate becomes
 * U+FFFD, and the export counts the strings it changed, so JSON lines and Parquet say the same.
 */
import { escapePointerToken } from './json.js';

/** What an export replaced: how many strings held a lone surrogate, and where the first was (`episode 3 step 2 at /error/message`). */
export interface Replaced {
  readonly strings: number;
  readonly first?: string;
}

// ES2024's String methods (Node 20 has them; the compiler's lib is ES2023).
type WellFormedString = string & { isWellFormed(): boolean; toWellFormed(): string };

export class WellFormed {
  #strings = 0;
  #first: string | undefined;
  /** Values already cleaned, by identity: states and rewards shared by many records are walked once. */
  readonly #done = new WeakMap<object, unknown>();
  #where = '';
  readonly #path: (string | number)[] = [];

  get replaced(): Replaced {
    return { strings: this.#strings, ...(this.#first !== undefined ? { first: this.#first } : {}) };
  }

  /** `value` with every lone surrogate replaced; the same object when it had none. `where` names it in the report (`episode 3 step 2`). */
  value<T>(value: T, where: string): T {
    this.#where = where;
    return this.#clean(value) as T;
  }

  #at<T>(key: string | number, value: T): T {
    this.#path.push(key);
    try {
      return this.#clean(value) as T;
    } finally {
      this.#path.pop();
    }
  }

  #clean(value: unknown): unknown {
    if (typeof value === 'string') return this.#string(value);
    if (typeof value !== 'object' || value === null) return value;
    const known = this.#done.get(value);
    if (known !== undefined) return known;
    let out: unknown = value;
    if (Array.isArray(value)) {
      let copy: unknown[] | undefined;
      value.forEach((item: unknown, i) => {
        const clean = this.#at(i, item);
        if (clean !== item) (copy ??= value.slice())[i] = clean;
      });
      out = copy ?? value;
    } else {
      let changed = false;
      const pairs = Object.entries(value as Record<string, unknown>).map(([key, item]) => {
        this.#path.push(key);
        const cleanKey = this.#string(key);
        this.#path.pop();
        const clean = this.#at(key, item);
        if (clean !== item || cleanKey !== key) changed = true;
        return [cleanKey, clean] as const;
      });
      if (changed) out = Object.fromEntries(pairs);
    }
    this.#done.set(value, out);
    return out;
  }

  #string(text: string): string {
    if ((text as WellFormedString).isWellFormed()) return text;
    this.#strings++;
    this.#first ??= (`${this.#where} at ${this.#path.map((p) => `/${escapePointerToken(p)}`).join('') || '/'}` as WellFormedString).toWellFormed();
    return (text as WellFormedString).toWellFormed();
  }
}
