/**
 * The library and the terminal views, loaded on first use: registering a command costs nothing,
 * so `agent --help` starts without ajv, the tool router or ink (commands import only types
 * statically; scripts/check-imports.ts enforces it).
 */
import type * as Core from '../src/internal.js';
import type * as Ui from '../src/ui/index.js';

export const core = (): Promise<typeof Core> => import('../src/internal.js');
export const ui = (): Promise<typeof Ui> => import('../src/ui/index.js');
