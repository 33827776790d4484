// Writes a validated ingest batch in ONE transaction (all or nothing), then publishes the new events to live streams.
import { HttpError } from '../http/http-error.ts';
import { transaction } from '../db/open.ts';
import { inTransaction } from '../db/tx.ts';
import type { EventRow } from '../db/events-store.ts';
import type { ControlDeps } from './deps.ts';
import type { IngestBatch } from './ingest-validate.ts';
import { createEventTruth } from './event-truth.ts';

export interface ControlItem {
  run: string;
  action: string;
  [key: string]: unknown;
}

export interface IngestResult {
  runs: number;
  events: number;
  duplicates: number;
  artifacts: number;
  notifications?: number;
  /** Present when the batch carried served_repos: how many the source now serves. */
  served_repos?: number;
  control: ControlItem[];
}

export function applyBatch(
  deps: ControlDeps, batch: IngestBatch, opts: { deliverControl?: boolean } = {},
): IngestResult {
  const { result, inserted } = transaction(deps.db, () => storeBatch(deps, batch, opts));
  deps.checkpoints.nudge();
  deps.bus.publish(inserted);
  return result;
}

/** A stored batch: its answer, and the events it added, to publish once the enclosing transaction has committed. */
export interface StoredBatch {
  result: IngestResult;
  inserted: EventRow[];
}

/**
 * applyBatch's writes, inside the caller's transaction (import stores many run folders in one) or a new one. Publishes
 * nothing: events go to live streams only after the commit, so a rolled-back import never showed any.
 */
export function storeBatch(
  deps: ControlDeps, batch: IngestBatch, opts: { deliverControl?: boolean } = {},
): StoredBatch {
  const { stores } = deps;
  const { source } = batch;
  const inserted: EventRow[] = [];
  let duplicates = 0;
  let notifications: number | undefined;

  const control = inTransaction(deps.db, () => {
    // Every referenced run must exist after this batch: checked before the first write, inside the lock.
    const known = new Set(batch.runs.map((r) => r.run));
    for (const item of [...batch.events, ...batch.artifacts]) {
      if (known.has(item.run)) continue;
      if (!stores.runs.get(source, item.run)) {
        throw new HttpError('invalid_param', `Run ${source}/${item.run} is unknown; send it in "runs" first`);
      }
      known.add(item.run);
    }
    const now = deps.clock();
    for (const run of batch.runs) {
      // A row stamped later than now (stored before body times were bounded, or by a clock since stepped back) is no
      // newer than this update: no stored claim to the future may keep a runner's real update out (ingest-validate.ts).
      const stored = stores.runs.get(source, run.run);
      const arriving = Math.min(now, run.updated_at ?? now);
      if (stored && stored.updated_at > now) stores.runs.patch(source, run.run, { updated_at: arriving });
      stores.runs.upsert(source, run);
    }
    // A status transition or answer the Control Plane already recorded is not stored twice (event-truth.ts).
    const truth = createEventTruth(stores.events);
    for (const shipped of batch.events) {
      const verdict = truth.check(shipped);
      if (!verdict.keep) {
        duplicates++;
        continue;
      }
      const ev = verdict.event;
      const id = stores.events.insert(ev);
      truth.stored(ev, id !== null);
      if (id === null) duplicates++;
      else inserted.push({ id, ...ev });
    }
    for (const a of batch.artifacts) {
      const { path, content_type, content } = a;
      stores.artifacts.put(source, a.run, { path, content_type, content, created_at: now });
    }
    if (batch.notifications.length > 0) notifications = stores.notifications.ingest(batch.notifications);
    if (batch.served_repos !== null) stores.servedRepos.replace(source, batch.served_repos, now);
    if (opts.deliverControl === false) return [];
    // Each run's requests go to its own worker, which ships it at least every 2 s: no runner relays for another.
    const pending = stores.controlRequests.takePending(source, batch.runs.map((r) => r.run), now);
    return pending.map((r) => ({ ...r.payload, id: r.id, run: r.run, action: r.action }));
  });

  const result: IngestResult = {
    runs: batch.runs.length,
    events: inserted.length,
    duplicates,
    artifacts: batch.artifacts.length,
    control,
  };
  if (notifications !== undefined) result.notifications = notifications;
  if (batch.served_repos !== null) result.served_repos = batch.served_repos.length;
  return { result, inserted };
}
