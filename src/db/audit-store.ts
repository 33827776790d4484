// Placeholder store: filled in by the helper that owns it (A2).
import type { Db } from './open.ts';

// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface AuditStore {}

export function createAuditStore(_db: Db): AuditStore {
  return {};
}
