/**
 * A stream kept up to a cap: its first bytes (a tool's output), or its last (what a failed program
 * said last); the rest counted, not kept, and the text marked where it was cut.
 */
export class CappedOutput {
  readonly #cap: number;
  readonly #keep: 'head' | 'tail';
  #chunks: Buffer[] = [];
  #kept = 0;
  #bytes = 0;

  constructor(cap: number, keep: 'head' | 'tail' = 'head') {
    this.#cap = cap;
    this.#keep = keep;
  }

  push(chunk: Buffer): void {
    this.#bytes += chunk.length;
    if (this.#keep === 'tail') {
      this.#chunks.push(chunk);
      this.#kept += chunk.length;
      // Trimmed once it holds twice the cap, so a long stream costs one copy per cap's worth.
      if (this.#kept > 2 * this.#cap) this.#trim();
      return;
    }
    if (this.#kept >= this.#cap) return;
    const part = chunk.subarray(0, this.#cap - this.#kept);
    this.#chunks.push(part);
    this.#kept += part.length;
  }

  #trim(): void {
    const all = Buffer.concat(this.#chunks);
    this.#chunks = [all.subarray(Math.max(0, all.length - this.#cap))];
    this.#kept = Math.min(all.length, this.#cap);
  }

  /** Every byte the stream carried. */
  get bytes(): number {
    return this.#bytes;
  }

  get truncated(): boolean {
    return this.#bytes > Math.min(this.#kept, this.#cap);
  }

  /** The kept bytes as text, with a marker saying how much there was when some were cut. */
  text(): string {
    if (this.#keep === 'tail') {
      this.#trim();
      const text = Buffer.concat(this.#chunks).toString('utf8');
      return this.truncated ? `[… truncated: ${this.#bytes} bytes in all, the last ${this.#kept} kept]\n${text}` : text;
    }
    const text = Buffer.concat(this.#chunks).toString('utf8');
    return this.truncated ? `${text}\n[… truncated: ${this.#bytes} bytes in all, the first ${this.#kept} kept]` : text;
  }
}
