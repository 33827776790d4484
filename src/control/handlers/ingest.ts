// POST /v1/ingest (the shipper's batches) and POST /v1/import (a project's .svc/runs read from disk).
import { checkBodyKeys, requireJsonObject } from '../../http/body.ts';
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import { json } from '../../http/respond.ts';
import { transaction } from '../../db/open.ts';
import type { ControlDeps } from '../deps.ts';
import { validateBatch, type IngestBatch } from '../ingest-validate.ts';
import { storeBatch } from '../ingest-apply.ts';
import type { IngestResult } from '../../client/types.ts';
import { importProject } from '../import-project.ts';
import { isRegisteredProject } from '../projects.ts';

/** One transaction (all or nothing), then the new events to live streams. */
function applyBatch(deps: ControlDeps, batch: IngestBatch): IngestResult {
  const { result, inserted, started } = transaction(deps.db, () => storeBatch(deps, batch));
  deps.checkpoints.nudge();
  deps.bus.publish(inserted);
  deps.metrics.observeEvents(inserted, started);
  return result;
}

export const ingestRuns: Handler<ControlDeps> = (ctx) => {
  const batch = validateBatch(ctx.body, ctx.deps.clock());
  if (ctx.runnerSource !== undefined && batch.source !== ctx.runnerSource) {
    throw new HttpError('forbidden_source', `This token may only ship runs of source "${ctx.runnerSource}"`);
  }
  // repo_path steers local actions: kept only for this server's own source in a registered project.
  const { deps } = ctx;
  for (const run of batch.runs) {
    const path = run.repo_path;
    if (!path || batch.source !== deps.settings.source || !isRegisteredProject(deps, path)) delete run.repo_path;
    delete run.pid;
  }
  // A run the operator deleted stays deleted when its runner ships it again (named in "deleted").
  const named = new Set([...batch.runs, ...batch.events, ...batch.artifacts].map((item) => item.run));
  const deleted = new Set([...named].filter((run) => deps.stores.deletedRuns.has(batch.source, run)));
  if (deleted.size === 0) return json(200, applyBatch(deps, batch));
  const kept = {
    ...batch,
    runs: batch.runs.filter((r) => !deleted.has(r.run)),
    events: batch.events.filter((e) => !deleted.has(e.run)),
    artifacts: batch.artifacts.filter((a) => !deleted.has(a.run)),
  };
  return json(200, { ...applyBatch(deps, kept), deleted: [...deleted].sort() });
};

export const importRuns: Handler<ControlDeps> = (ctx) => {
  const body = requireJsonObject(ctx.body);
  checkBodyKeys(body, ['path']);
  return json(200, importProject(ctx.deps, body.path));
};
