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
  return json(200, applyBatch(ctx.deps, batch));
};

export const importRuns: Handler<ControlDeps> = async (ctx) => {
  const body = ctx.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new HttpError('bad_request', 'Request body must be a JSON object');
  for (const key of Object.keys(body)) if (key !== 'path') throw new HttpError('invalid_param', `Unknown field "${key}"`);
  return json(200, await importProject(ctx.deps, (body as { path?: unknown }).path));
};
