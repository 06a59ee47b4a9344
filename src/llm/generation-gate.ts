/**
 * `pause` / `resume` of a socket's rollouts, for a trainer pushing weights: while paused no new
 * completion is sent to the inference server (those asked for wait, in the order asked), those
 * already at the server finish; `resume` lets the waiting ones go in that order. Episodes are not
 * cancelled: their next turns run on the new weights and carry the new version.
 */
export class GenerationGate {
  #paused = false;
  readonly #waiting: { readonly go: () => void }[] = [];

  get paused(): boolean {
    return this.#paused;
  }

  /** Completions waiting for `resume`. */
  get waiting(): number {
    return this.#waiting.length;
  }

  pause(): void {
    this.#paused = true;
  }

  /** Releases every waiting completion, first asked first; returns how many. */
  resume(): number {
    this.#paused = false;
    const released = this.#waiting.splice(0);
    for (const w of released) w.go();
    return released.length;
  }

  /** Resolves at once when not paused, else once resumed; rejects (and leaves the queue) if `signal` aborts first. */
  pass(signal?: AbortSignal): Promise<void> {
    if (!this.#paused) return Promise.resolve();
    signal?.throwIfAborted();
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        const at = this.#waiting.indexOf(entry);
        if (at !== -1) this.#waiting.splice(at, 1);
        reject(signal?.reason);
      };
      const entry = {
        go: (): void => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      this.#waiting.push(entry);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
