// The heap a test retains, measured after a full collection: heapUsed alone counts the garbage a
// busy loop leaves behind, which swings by megabytes with the collector's timing, not the code's.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

/** Bytes of heap in use after a full garbage collection. */
export function retainedHeap(): number {
  collect();
  return process.memoryUsage().heapUsed;
}
