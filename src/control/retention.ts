// The `retention_days` setting and SVC_CONTROL_AUDIT_RETENTION_DAYS: hourly sweeps in small batches, so a large
// backlog never holds the write lock for long (docs/control-config.md).
import type { ControlDeps } from './deps.ts';
import { readEffectiveConfig } from './config-schema.ts';
import { transaction } from '../db/open.ts';
import { SETTINGS } from '../settings-registry.ts';
import { errorMessage } from '../errors.ts';
import { iso } from '../iso-time.ts';
import { DAY_MS } from '../db/stats-store.ts';

const BATCH = 200;
const RETENTION_SWEEP_MS = 60 * 60 * 1000;

export function pruneExpiredRuns(deps: ControlDeps, now = deps.clock()): number {
  const days = readEffectiveConfig(deps.stores.config).config.retention_days as number;
  if (!(days > 0)) return 0;
  const before = now - days * DAY_MS;
  let deleted = 0;
  for (;;) {
    const batch = deps.stores.runs.listEnded(before, BATCH);
    const progress = transaction(deps.db, () =>
      batch.filter((r) => deps.stores.runs.delete(r.source, r.run) === 'deleted').length);
    deleted += progress;
    if (batch.length < BATCH || progress === 0) break;
  }
  if (deleted > 0) {
    deps.stores.audit.append({
      actor: 'system', peer: '', action: 'runs.prune', target: null, outcome: 'ok',
      detail: { deleted, retention_days: days, ended_before: iso(before) },
    });
    deps.log.info('retention sweep', { deleted, retention_days: days });
  }
  return deleted;
}

/** Audit rows per prune transaction; each batch is anchored by its own `audit.prune` row. */
const AUDIT_BATCH = 5_000;

export function pruneAuditLog(deps: ControlDeps, now = deps.clock()): number {
  const days = deps.settings.auditRetentionDays ?? SETTINGS.SVC_CONTROL_AUDIT_RETENTION_DAYS.default;
  if (!(days > 0)) return 0;
  let deleted = 0;
  for (;;) {
    const n = deps.stores.audit.pruneBefore(now - days * DAY_MS, AUDIT_BATCH);
    deleted += n;
    if (n < AUDIT_BATCH) break;
  }
  if (deleted > 0) deps.log.info('audit retention sweep', { deleted, audit_retention_days: days });
  return deleted;
}

/** A failed sweep is logged and tried again next time. */
export function startRetentionSweeps(deps: ControlDeps): () => void {
  function sweep(): void {
    try {
      pruneExpiredRuns(deps);
      pruneAuditLog(deps);
    } catch (err) {
      deps.log.error('retention sweep failed', { error: errorMessage(err) });
    }
  }
  sweep();
  const timer = setInterval(sweep, RETENTION_SWEEP_MS);
  timer.unref();
  return () => clearInterval(timer);
}
