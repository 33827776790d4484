// POST /v1/ingest (the shipper's batches) and POST /v1/import (a project's .svc/runs read from disk).
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import { json } from '../../http/respond.ts';
import type { ControlDeps } from '../deps.ts';
import { validateBatch } from '../ingest-validate.ts';
import { applyBatch } from '../ingest-apply.ts';
import { importProject } from '../import-project.ts';

export const ingestRuns: Handler<ControlDeps> = (ctx) => {
  // Everything is validated before the first write: a bad batch changes nothing.
  const batch = validateBatch(ctx.body, ctx.deps.clock());
  // A runner token ships its own source's runs only (runner-tokens.ts).
  if (ctx.runnerSource !== undefined && batch.source !== ctx.runnerSource) {
    throw new HttpError('forbidden_source', `This token may only ship runs of source "${ctx.runnerSource}"`);
  }
  // repo_path steers local actions (stop signals the process recorded in that folder, resume and verify run there),
  // so it comes only from this server's own /v1/start, retry or /v1/import, never from a batch: on a loopback-bound
  // server every peer is loopback, so "from this machine" proves nothing. Runs shipped without one are steered
  // through control requests in their runner's next ingest response (docs/control-data.md).
  for (const run of batch.runs) {
    delete run.repo_path;
    delete run.pid;
  }
  return json(200, applyBatch(ctx.deps, batch));
};

export const importRuns: Handler<ControlDeps> = async (ctx) => {
  const body = ctx.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new HttpError('bad_request', 'Request body must be a JSON object');
  for (const key of Object.keys(body)) if (key !== 'path') throw new HttpError('invalid_param', `Unknown field "${key}"`);
  return json(200, await importProject(ctx.deps, (body as { path?: unknown }).path));
};
