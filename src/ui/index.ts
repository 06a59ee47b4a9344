/**
 * `agentic-rl-toolkit/ui`: the live terminal views of `agent run` and `agent fuzz`, and the `agent debug` console (ink + React).
 * A separate entry point so that importing the core never loads them; the CLI imports it only on
 * a TTY. Its declarations mention no React type, so a consumer type-checks without @types/react.
 *
 * @module agentic-rl-toolkit/ui
 */
export { renderRunView } from './render-run.js';
export { renderFuzzView, type FuzzSource } from './render-fuzz.js';
export { renderDebugConsole } from './render-debug.js';
export type { Output, RunSource } from './run-source.js';
