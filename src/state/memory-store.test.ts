import { describeStateStore } from './store.conformance.js';
import { MemoryStateStore } from './memory-store.js';

describeStateStore('memory', (options) => new MemoryStateStore(options));
