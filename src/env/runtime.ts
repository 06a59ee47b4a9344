/** What every instance of one env shares. Internal to src/env. */
import type { EnvDefinition } from '../schema/definition.js';
import type { StateValidator } from '../schema/state-validator.js';
import type { Clock } from '../shared/clock.js';
import type { Emitter } from '../shared/emitter.js';
import type { StateStore } from '../state/store.js';
import type { ToolRouter } from '../tools/router.js';
import type { EnvEvent } from '../events/env-events.js';
import type { EnvRewards } from '../reward/env-rewards.js';

export interface EnvRuntime {
  readonly definition: EnvDefinition;
  /** Validates commits in time proportional to the patch (see schema/state-validator.ts). */
  readonly stateValidator: StateValidator;
  readonly router: ToolRouter;
  readonly store: StateStore;
  readonly clock: Clock;
  readonly events: Emitter<EnvEvent>;
  readonly rewards: EnvRewards;
  /** Aborts every call of every instance when the env is closed. */
  readonly signal: AbortSignal;
}
