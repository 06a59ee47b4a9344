/**
 * An error made without capturing its stack: for a reason the runtime hands to an abort as routine
 * (an episode's end), whose stack would only point at the runtime's own code, and which every
 * episode makes (~5–20 µs with a stack, under 1 without). Its own module: `Error.stackTraceLimit`
 * is Node's, outside the types the web console's shared code is checked against.
 */
export function withoutStack<T extends Error>(make: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
