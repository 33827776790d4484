// Placeholder store: filled in by the helper that owns it (A1).
import type { Db } from './open.ts';

// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface ArtifactsStore {}

export function createArtifactsStore(_db: Db): ArtifactsStore {
  return {};
}
