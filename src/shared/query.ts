/**
 * The `/` search of the debug console: free words match anywhere in a row's text, and
 * `key:value` terms match a named field (`tool:get_weather status:failed ep:3`). All terms must match.
 */
export interface Query {
  readonly fields: ReadonlyMap<string, string>;
  readonly words: readonly string[];
}

export function parseQuery(text: string): Query {
  const fields = new Map<string, string>();
  const words: string[] = [];
  for (const term of text.trim().split(/\s+/).filter(Boolean)) {
    const m = /^([a-z]+):(.+)$/i.exec(term);
    if (m) fields.set((m[1] as string).toLowerCase(), (m[2] as string).toLowerCase());
    else words.push(term.toLowerCase());
  }
  return { fields, words };
}

/** Whether a row matches: its named fields (exact, case-insensitive) and its whole text (substring). */
export function matches(q: Query, fields: Readonly<Record<string, string | number | undefined>>, text: string): boolean {
  for (const [k, v] of q.fields) {
    const have = fields[k];
    if (have === undefined || String(have).toLowerCase() !== v) return false;
  }
  if (q.words.length === 0) return true;
  const hay = text.toLowerCase();
  return q.words.every((w) => hay.includes(w));
}
