/** A binary min-heap by a numeric key: O(log n) push and pop, so deadlines never need a scan. */
export class MinHeap<T> {
  readonly #keys: number[] = [];
  readonly #items: T[] = [];

  get size(): number {
    return this.#keys.length;
  }

  peekKey(): number | undefined {
    return this.#keys[0];
  }

  push(key: number, item: T): void {
    const keys = this.#keys;
    const items = this.#items;
    let i = keys.length;
    keys.push(key);
    items.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((keys[parent] as number) <= key) break;
      keys[i] = keys[parent] as number;
      items[i] = items[parent] as T;
      i = parent;
    }
    keys[i] = key;
    items[i] = item;
  }

  /** Removes and returns the item with the smallest key. */
  pop(): T | undefined {
    const keys = this.#keys;
    const items = this.#items;
    if (keys.length === 0) return undefined;
    const top = items[0];
    const lastKey = keys.pop() as number;
    const lastItem = items.pop() as T;
    const n = keys.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const c = r < n && (keys[r] as number) < (keys[l] as number) ? r : l;
        if ((keys[c] as number) >= lastKey) break;
        keys[i] = keys[c] as number;
        items[i] = items[c] as T;
        i = c;
      }
      keys[i] = lastKey;
      items[i] = lastItem;
    }
    return top;
  }
}
