// All Control Plane stores over one connection; each prepares its statements once.
import type { Db } from './open.ts';
import { createRunsStore, type RunsStore } from './runs-store.ts';
import { createEventsStore, type EventsStore } from './events-store.ts';
import { createArtifactsStore, type ArtifactsStore } from './artifacts-store.ts';
import { createControlRequestsStore, type ControlRequestsStore } from './control-requests-store.ts';
import { createAuditStore, type AuditStore } from './audit-store.ts';
import { createConfigStore, type ConfigStore } from './config-store.ts';
import { createNotificationsStore, type NotificationsStore } from './notifications-store.ts';
import { createStatsStore, type StatsStore } from './stats-store.ts';
import { createStartRequestsStore, type StartRequestsStore } from './start-requests-store.ts';
import { createMergeQueueStore, type MergeQueueStore } from './merge-queue-store.ts';
import { createProjectsStore, type ProjectsStore } from './projects-store.ts';
import { createDeletedRunsStore, type DeletedRunsStore } from './deleted-runs-store.ts';
import { createServedReposStore, type ServedReposStore } from './served-repos-store.ts';

export interface ControlStores {
  runs: RunsStore;
  events: EventsStore;
  artifacts: ArtifactsStore;
  controlRequests: ControlRequestsStore;
  audit: AuditStore;
  config: ConfigStore;
  notifications: NotificationsStore;
  stats: StatsStore;
  startRequests: StartRequestsStore;
  mergeQueue: MergeQueueStore;
  projects: ProjectsStore;
  deletedRuns: DeletedRunsStore;
  servedRepos: ServedReposStore;
  close(): void;
}

export function createControlStores(db: Db): ControlStores {
  return {
    runs: createRunsStore(db),
    events: createEventsStore(db),
    artifacts: createArtifactsStore(db),
    controlRequests: createControlRequestsStore(db),
    audit: createAuditStore(db),
    config: createConfigStore(db),
    notifications: createNotificationsStore(db),
    stats: createStatsStore(db),
    startRequests: createStartRequestsStore(db),
    mergeQueue: createMergeQueueStore(db),
    projects: createProjectsStore(db),
    deletedRuns: createDeletedRunsStore(db),
    servedRepos: createServedReposStore(db),
    close() {},
  };
}
