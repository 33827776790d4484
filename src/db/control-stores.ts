// Placeholder: one store per Control Plane table (foundation issue).
export interface ControlStores {
  close(): void;
}
import type { Db } from './open.ts';
export function createControlStores(_db: Db): ControlStores {
  return { close() {} };
}
