/**
 * Abort helpers. Every child controller is linked to its parent and unlinked in `dispose`, so
 * long-lived parents (a run's signal) do not collect listeners from short-lived children.
 */
export interface LinkedController extends Disposable {
  readonly controller: AbortController;
  readonly signal: AbortSignal;
}

/** A controller that aborts when any of `parents` aborts. Call `[Symbol.dispose]()` when done. */
export function linkedController(...parents: (AbortSignal | undefined)[]): LinkedController {
  const controller = new AbortController();
  const cleanups: (() => void)[] = [];
  for (const parent of parents) {
    if (!parent) continue;
    if (parent.aborted) {
      controller.abort(parent.reason);
      break;
    }
    const onAbort = (): void => controller.abort(parent.reason);
    parent.addEventListener('abort', onAbort, { once: true });
    cleanups.push(() => parent.removeEventListener('abort', onAbort));
  }
  return {
    controller,
    signal: controller.signal,
    [Symbol.dispose]() {
      for (const c of cleanups) c();
      cleanups.length = 0;
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
