// Writes a validated ingest batch inside the caller's transaction. Publishes nothing: a rolled-back batch or import
// never showed any event to a live stream.
import { invalidParam } from './params.ts';
import type { EventRow } from '../db/events-store.ts';
import type { ControlDeps } from './deps.ts';
import type { IngestBatch } from './ingest-validate.ts';
import { createEventTruth } from './event-truth.ts';
import type { IngestResult } from '../client/types.ts';

/** Also each named run's start as stored, for the metrics, which would otherwise read every run again. */
export function storeBatch(
  deps: ControlDeps, batch: IngestBatch, opts: { deliverControl?: boolean } = {},
): { result: IngestResult; inserted: EventRow[]; started: Map<string, number> } {
  const { stores } = deps;
  const { source } = batch;
  // Every referenced run must exist after this batch: checked before the first write, inside the lock.
  const known = new Set(batch.runs.map((r) => r.run));
  const started = new Map<string, number>();
  for (const item of [...batch.events, ...batch.artifacts]) {
    if (known.has(item.run)) continue;
    const row = stores.runs.get(source, item.run);
    if (!row) invalidParam(`Run ${source}/${item.run} is unknown; send it in "runs" first`);
    started.set(item.run, row.started_at);
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
    started.set(run.run, stored?.started_at ?? run.started_at);
  }
  const inserted: EventRow[] = [];
  const truth = createEventTruth(stores.events);
  for (const shipped of batch.events) {
    const row = truth.insert(shipped);
    if (row) inserted.push(row);
  }
  for (const a of batch.artifacts) {
    const { path, content_type, content } = a;
    stores.artifacts.put(source, a.run, { path, content_type, content, created_at: now });
  }
  const result: IngestResult = {
    runs: batch.runs.length,
    events: inserted.length,
    duplicates: batch.events.length - inserted.length,
    artifacts: batch.artifacts.length,
    control: [],
  };
  if (batch.notifications.length > 0) result.notifications = stores.notifications.ingest(batch.notifications);
  if (batch.served_repos !== null) {
    stores.servedRepos.replace(source, batch.served_repos, now);
    result.served_repos = batch.served_repos.length;
  }
  if (opts.deliverControl !== false) {
    // Each run's requests go to its own worker, which ships it at least every 2 s: no runner relays for another.
    const pending = stores.controlRequests.takePending(source, batch.runs.map((r) => r.run), now);
    result.control = pending.map((r) => ({ ...r.payload, id: r.id, run: r.run, action: r.action }));
  }
  return { result, inserted, started };
}
