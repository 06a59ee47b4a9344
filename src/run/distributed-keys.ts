/**
 * The Redis keys of a distributed run, all under the run's hash tag beside its journal
 * (`agent:<run-id>:{<run-id>}:…`): one place, because the queue's scripts and the workers'
 * fenced writes touch the same ones.
 */
export interface DistributedKeys {
  readonly meta: string;
  readonly episodes: string;
  readonly inflight: string;
  /** Everything committed, in order: what the coordinator shows and writes. */
  readonly events: string;
  /** Per episode: the current lease's fencing token. */
  readonly fences: string;
  /** Per episode: claims since it last committed a step. */
  readonly attempts: string;
  /** Per episode: committed steps when it was last claimed. */
  readonly marks: string;
  /** Per episode: the worker that claimed it last. */
  readonly owners: string;
  /** An episode's committed steps, stream ids numbered by step. */
  steps(episode: number): string;
}

export function distributedKeys(runId: string): DistributedKeys {
  const base = `agent:${runId}:{${runId}}:`;
  return {
    meta: `${base}meta`,
    episodes: `${base}episodes`,
    inflight: `${base}inflight`,
    events: `${base}events`,
    fences: `${base}fences`,
    attempts: `${base}attempts`,
    marks: `${base}marks`,
    owners: `${base}owners`,
    steps: (episode) => `${base}steps:${episode}`,
  };
}
