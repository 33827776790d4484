// Placeholder: in-process fan-out of stored events to SSE subscribers (foundation issue).
export interface RunEventBus {
  close(): void;
}
import type { ControlStores } from '../db/control-stores.ts';
export function createRunEventBus(_stores: ControlStores): RunEventBus {
  return { close() {} };
}
