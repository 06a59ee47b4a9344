/**
 * Abort helpers. Every child controller is linked to its parent and unlinked in `dispose`, so
 * long-lived parents (a run's signal) do not collect listeners from short-lived children.
 */

/** The controllers linked to a signal, kept on the signal itself (not in a WeakMap: no ephemeron for the collector to trace). */
const LINKED = Symbol('linked controllers');
type Parent = AbortSignal & { [LINKED]?: Set<AbortController> };

/**
 * The set of controllers linked to `parent`, with the one listener that aborts them. A listener
 * per child would cost each link a scan of the parent's listener list (addEventListener refuses
 * duplicates): with 4,096 instances on one env signal, a quadratic reset.
 */
function linkedTo(parent: Parent): Set<AbortController> {
  let children = parent[LINKED];
  if (children === undefined) {
    const set = new Set<AbortController>();
    children = set;
    Object.defineProperty(parent, LINKED, { value: set });
    parent.addEventListener(
      'abort',
      () => {
        for (const child of set) child.abort(parent.reason);
        set.clear();
      },
      { once: true },
    );
  }
  return children;
}

export interface LinkedController extends Disposable {
  readonly controller: AbortController;
  readonly signal: AbortSignal;
}

/** A controller that aborts when any of `parents` aborts. Call `[Symbol.dispose]()` when done. */
export function linkedController(...parents: (AbortSignal | undefined)[]): LinkedController {
  const controller = new AbortController();
  const links: Set<AbortController>[] = [];
  for (const parent of parents) {
    if (!parent) continue;
    if (parent.aborted) {
      controller.abort(parent.reason);
      break;
    }
    const children = linkedTo(parent);
    children.add(controller);
    links.push(children);
  }
  return {
    controller,
    signal: controller.signal,
    [Symbol.dispose]() {
      for (const children of links) children.delete(controller);
      links.length = 0;
    },
  };
}

/** Resolves after `ms`, or rejects with the signal's reason when aborted first. The timer never outlives the call. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  // A zero sleep needs no timer: Node clamps setTimeout(0) to 1 ms, a ceiling of 1,000 steps/s.
  if (!(ms > 0)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Rejects with the signal's reason when it aborts; the listener is removed once `promise` settles. */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
