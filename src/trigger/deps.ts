// Everything a trigger handler may touch, passed in (STYLE habit 2): tests build this with temp paths.
import type { TriggerSettings } from './settings.ts';
import type { JobQueue } from './queue.ts';
import type { Logger } from '../log.ts';
import type { SkipCounts } from './skip-counts.ts';

export interface TriggerDeps {
  settings: TriggerSettings;
  queue: JobQueue;
  clock: () => number;
  log: Logger;
  /** Deliveries refused because no served repository takes them (GET /status). */
  skips: SkipCounts;
  /** The server listens and has not begun to shut down (GET /ready). */
  accepting: () => boolean;
}
