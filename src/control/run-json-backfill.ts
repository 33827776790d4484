// Fills the stored Run JSON text (control migration 3) of runs that lack it: every run of a DB written before that
// migration, and any row a plain-SQL UPDATE touched. Small batches between other work, never on a request: until a
// page's runs all have their text, GET /v1/runs builds that page from the columns (same bytes, slower).
import type { RunsStore } from '../db/runs-store.ts';
import type { Logger } from '../log.ts';

/** Rows per turn of the event loop: ~a few ms of work, so requests in between wait at most that long. */
const BATCH = 500;
/** How often an idle backfill looks again (one query on an index that is empty when nothing is missing). */
export const BACKFILL_IDLE_MS = 60_000;

export function startRunJsonBackfill(runs: Pick<RunsStore, 'fillMissingJson'>, log: Logger, idleMs = BACKFILL_IDLE_MS): () => void {
  let immediate: NodeJS.Immediate | undefined;
  let timeout: NodeJS.Timeout | undefined;
  let stopped = false;
  let filled = 0;

  function step(): void {
    immediate = undefined;
    timeout = undefined;
    if (stopped) return;
    let n = 0;
    try {
      n = runs.fillMissingJson(BATCH);
    } catch (err) {
      // Busy DB or a closing server: try again later, the list stays correct meanwhile.
      log.warn('run JSON backfill failed', { error: err instanceof Error ? err.message : String(err) });
    }
    filled += n;
    if (n === BATCH) {
      immediate = setImmediate(step);
      return;
    }
    if (filled > 0) log.info('run JSON backfill', { filled });
    filled = 0;
    timeout = setTimeout(step, idleMs);
    timeout.unref();
  }

  immediate = setImmediate(step);
  return () => {
    stopped = true;
    if (immediate) clearImmediate(immediate);
    if (timeout) clearTimeout(timeout);
  };
}
