/** The runs recorded in fixtures/recorded/, replayed by the tests (re-record with `npm run record`). */
import type { RunOptions } from './run.js';

export const RECORDINGS: readonly { readonly file: string; readonly options: RunOptions }[] = [
  { file: 'fixtures/recorded/weather-seed7.jsonl', options: { env: 'fixtures/weather', episodes: 4, concurrency: 2, maxSteps: 3, seed: 7, toolOptions: { latency_scale: 0 } } },
  { file: 'fixtures/recorded/airline-seed3.jsonl', options: { env: 'fixtures/airline', episodes: 3, concurrency: 3, maxSteps: 4, seed: 3 } },
];
