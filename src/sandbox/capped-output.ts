/** A stream's first bytes, kept up to a cap; the rest counted, not kept, and the text marked where it was cut. */
export class CappedOutput {
  readonly #cap: number;
  readonly #chunks: Buffer[] = [];
  #kept = 0;
  #bytes = 0;

  constructor(cap: number) {
    this.#cap = cap;
  }

  push(chunk: Buffer): void {
    this.#bytes += chunk.length;
    if (this.#kept >= this.#cap) return;
    const part = chunk.subarray(0, this.#cap - this.#kept);
    this.#chunks.push(part);
    this.#kept += part.length;
  }

  /** Every byte the stream carried. */
  get bytes(): number {
    return this.#bytes;
  }

  get truncated(): boolean {
    return this.#bytes > this.#kept;
  }

  /** The kept bytes as text, with a marker saying how much there was when some were cut. */
  text(): string {
    const text = Buffer.concat(this.#chunks).toString('utf8');
    return this.truncated ? `${text}\n[… truncated: ${this.#bytes} bytes in all, the first ${this.#kept} kept]` : text;
  }
}
