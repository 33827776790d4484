// Placeholder store: filled in by the helper that owns it (A2).
import type { Db } from './open.ts';

// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface NotificationsStore {}

export function createNotificationsStore(_db: Db): NotificationsStore {
  return {};
}
