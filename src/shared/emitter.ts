/**
 * A minimal typed event bus: listeners per event type plus "any" listeners. Synchronous
 * delivery keeps ordering exact (the run writer sees events in the order the core made them);
 * a throwing listener is reported to `onListenerError` and never breaks the emitter.
 */
export type Listener<E> = (event: E) => void;

export class Emitter<E extends { readonly type: string }> {
  readonly #byType = new Map<E['type'], Set<Listener<E>>>();
  readonly #any = new Set<Listener<E>>();
  readonly #onListenerError: (err: unknown, event: E) => void;

  constructor(onListenerError: (err: unknown, event: E) => void = () => {}) {
    this.#onListenerError = onListenerError;
  }

  /** Subscribe to one event type. Returns the unsubscribe function. */
  on<T extends E['type']>(type: T, listener: Listener<Extract<E, { type: T }>>): () => void {
    let set = this.#byType.get(type);
    if (!set) {
      set = new Set();
      this.#byType.set(type, set);
    }
    const l = listener as Listener<E>;
    set.add(l);
    return () => set.delete(l);
  }

  /** Subscribe to every event. Returns the unsubscribe function. */
  onAny(listener: Listener<E>): () => void {
    this.#any.add(listener);
    return () => this.#any.delete(listener);
  }

  get hasListeners(): boolean {
    return this.#any.size > 0 || this.#byType.size > 0;
  }

  emit(event: E): void {
    const set = this.#byType.get(event.type as E['type']);
    if (set) for (const l of set) this.#call(l, event);
    for (const l of this.#any) this.#call(l, event);
  }

  #call(listener: Listener<E>, event: E): void {
    try {
      listener(event);
    } catch (err) {
      this.#onListenerError(err, event);
    }
  }
}
