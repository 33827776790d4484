// Everything a Control Plane handler may touch, passed in (STYLE habit 2): tests build this with temp paths.
import type { Db } from '../db/open.ts';
import type { ControlStores } from '../db/control-stores.ts';
import type { RunEventBus } from './event-bus.ts';
import type { RunController } from './run-controller.ts';
import type { ControlSettings } from './settings.ts';
import type { Logger } from '../log.ts';
import type { RefusalTally } from './refusal-tally.ts';
import type { ExpensiveReads } from './expensive-reads.ts';
import type { WalCheckpointer } from '../db/wal-checkpointer.ts';
import type { ControlMetrics } from './metrics.ts';

export interface ControlDeps {
  db: Db;
  stores: ControlStores;
  bus: RunEventBus;
  engine: RunController;
  /** The git a request needs: handlers never run git themselves (main.ts gives the host's hardened git). */
  repos: {
    rootOf(dir: string): string | null;
    /** "owner/name" from the origin remote, else the folder name. */
    nameOf(root: string): string;
  };
  reads: ExpensiveReads;
  settings: ControlSettings;
  /** For read-only detection (providers, integrations); never echoed. */
  env: NodeJS.ProcessEnv;
  clock: () => number;
  log: Logger;
  url: () => string;
  refusals: RefusalTally;
  checkpoints: WalCheckpointer;
  metrics: ControlMetrics;
}
