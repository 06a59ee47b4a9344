#!/usr/bin/env node
// The toolkit ships TypeScript; tsx compiles it on the fly, so there is no build step to forget.
import { register } from 'tsx/esm/api';

register();
await import('./agent.ts');
