// The embedded store on node:test's mock clock, for unit tests of its time rules: each test gets a new store whose
// Date.now starts at 0, with setInterval mocked too, so that the store's sweeper is armed on the mocked timers and
// never fires for real. Call it inside a describe; it returns the current test's store.
import { afterEach, beforeEach, mock } from 'node:test';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';

export function memoryStoreOnMockClock(): () => MemoryTaskStore {
  let store: MemoryTaskStore | undefined;
  beforeEach(() => {
    mock.timers.enable({ apis: ['Date', 'setInterval'], now: 0 });
    store = new MemoryTaskStore();
  });
  afterEach(async () => {
    await store?.close();
    mock.timers.reset();
  });
  return () => {
    if (store === undefined) throw new Error('memoryStoreOnMockClock: no test is running');
    return store;
  };
}
