/**
 * Where a schema comparison is inside a payload (compare.ts): the frames from the root schema
 * down to the node a rule looks at, and how a candidate value found there is embedded into a
 * whole payload, so that ajv can confirm it against both schemas as a document, not a fragment.
 */
import { escapePointerToken, isPlainObject } from '../shared/json.js';
import type { Schema } from '../schema/normalize.js';

export type Via = 'property' | 'item' | 'index' | 'extra';

/** One step down: the producer's schema there, and the key or index it is reached by. */
export interface Frame {
  readonly P: Schema;
  readonly key: string;
  readonly via: Via;
}

/** A path whose containers the base payload lacks: nothing can be placed there. */
export const NONE: unique symbol = Symbol('none');

/** Build the parent value for one frame, with `child` at the frame's key. */
export function place(frame: Frame, child: unknown, base: unknown): unknown {
  if (frame.via === 'item' || frame.via === 'index') {
    const arr = Array.isArray(base) ? [...base] : [];
    const i = frame.via === 'index' ? Number(frame.key) : 0;
    while (arr.length < i) arr.push(null);
    arr[i] = child;
    return arr;
  }
  return { ...(isPlainObject(base) ? base : {}), [frame.key]: child };
}

/** Put `local` at the frames' path inside `base` (a whole payload); NONE if the path's containers are missing. */
export function setAt(base: unknown, frames: readonly Frame[], local: unknown): unknown {
  if (frames.length === 0) return local;
  const [first, ...rest] = frames as [Frame, ...Frame[]];
  if (first.via === 'item' || first.via === 'index') {
    if (!Array.isArray(base)) return NONE;
    const i = first.via === 'index' ? Number(first.key) : 0;
    if (i >= base.length) return NONE;
    const inner = setAt(base[i], rest, local);
    return inner === NONE ? NONE : base.map((v, j) => (j === i ? inner : v));
  }
  if (!isPlainObject(base)) return NONE;
  const inner = rest.length === 0 ? local : setAt(base[first.key], rest, local);
  return inner === NONE ? NONE : { ...base, [first.key]: inner };
}

/** The JSON pointer of the frames' path in a payload (`*` for any item or undeclared key). */
export function instancePath(frames: readonly Frame[]): string {
  return frames.map((f) => `/${f.via === 'item' || f.via === 'extra' ? '*' : escapePointerToken(f.key)}`).join('');
}
