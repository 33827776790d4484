// Placeholder store: filled in by the helper that owns it (B).
import type { Db } from './open.ts';

// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface MergeQueueStore {}

export function createMergeQueueStore(_db: Db): MergeQueueStore {
  return {};
}
