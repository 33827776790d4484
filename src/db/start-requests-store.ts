// Placeholder store: filled in by the helper that owns it (B).
import type { Db } from './open.ts';

// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface StartRequestsStore {}

export function createStartRequestsStore(_db: Db): StartRequestsStore {
  return {};
}
