// POST /jobs and GET /jobs/<id>: bearer SVC_API_TOKEN (constant time), validated briefs, the job JSON of DESIGN §5.
import { HttpError } from '../../http/http-error.ts';
import { checkBodyKeys, parseJsonObject } from '../../http/body.ts';
import { checkBearer, checkHost, checkJsonContentType, isLocalCaller, isLoopbackHost } from '../../http/guards.ts';
import { json, type Reply } from '../../http/respond.ts';
import { DEFAULT_BRIEF_BYTES, sourceOf, stripLeadingHyphens } from '../../webhook-sources.ts';
import { CONTROL } from '../../one-line.ts';
import { JOB_ID } from '../queue.ts';
import type { JobRow } from '../../db/trigger-jobs-store.ts';
import { iso } from '../../iso-time.ts';
import { enqueue, secretFor, type TCtx } from '../intake.ts';

const JOBS_FIELDS = new Set(['brief', 'pr', 'request_id', 'repo']);

/** Refuses instead of repairing: a caller with a token gets told exactly what is wrong with its brief. */
function validateJobsBrief(value: unknown): string {
  const refuse = (rule: string) => new HttpError('invalid_param', `"brief" must ${rule}`);
  if (typeof value !== 'string' || value.trim() === '') throw refuse('be a non-empty string');
  const max = sourceOf('jobs').briefBytes ?? DEFAULT_BRIEF_BYTES;
  if (Buffer.byteLength(value, 'utf8') > max) throw refuse(`be at most ${max} bytes`);
  if (CONTROL.test(value)) throw refuse('be one line without control characters');
  const brief = value.trim();
  if (stripLeadingHyphens(brief) !== brief) throw refuse('not start with "-"');
  return brief;
}

/** The served repository a `/jobs` body names, else the default one; never one it did not name (400). */
function jobsRepo(ctx: TCtx, value: unknown): string {
  const router = ctx.deps.settings.repos;
  if (value === undefined) {
    const fallback = router.entries.find((e) => e.isDefault);
    if (!fallback) throw new HttpError('invalid_param', '"repo" is required: no served repository is the default');
    return fallback.name;
  }
  if (typeof value !== 'string' || value.length > 200) {
    throw new HttpError('invalid_param', '"repo" must be "owner/name"');
  }
  const repo = router.byName(value);
  if (!repo) {
    const served = router.entries.slice(0, 10).map((e) => e.name).join(', ');
    throw new HttpError('invalid_param',
      `"repo" names a repository that is not served: "${value}" (served: ${served})`);
  }
  return repo.name;
}

/** Its bearer token was checked (intake.ts `admit`). */
export async function createJob(ctx: TCtx, raw: Buffer): Promise<Reply> {
  checkJsonContentType(ctx.req);
  const body = parseJsonObject(raw);
  checkBodyKeys(body, JOBS_FIELDS);
  const brief = validateJobsBrief(body.brief);
  if (body.pr !== undefined && typeof body.pr !== 'boolean') {
    throw new HttpError('invalid_param', '"pr" must be a boolean');
  }
  // The body hash dedupes retries; a caller who means "again" sends a new request_id.
  if (body.request_id !== undefined && (typeof body.request_id !== 'string' || body.request_id.length > 200)) {
    throw new HttpError('invalid_param', '"request_id" must be a string of at most 200 characters');
  }
  const repo = jobsRepo(ctx, body.repo);
  const args = ['start', '--brief', brief, ...(body.pr === true ? ['--pr'] : []), '--detach'];
  return enqueue(ctx, { origin: 'jobs', repo, brief, args });
}

// Who may read a job (and GET /metrics): SVC_API_TOKEN's bearer; without one, a local caller of a loopback-bound
// server under a loopback Host name (no DNS rebinding), unproxied (a reverse proxy on this machine connects from
// loopback for every client it serves); else nothing (503 names the token). A token that is set but
// disabled (equal to another secret, a file that could not be read) answers 503: it never opens reads to any caller.
export function mayRead(ctx: TCtx): void {
  if (ctx.deps.settings.secrets.jobs.set) {
    checkBearer(ctx.req, secretFor(ctx, 'jobs'));
    return;
  }
  if (isLocalCaller(ctx.req, isLoopbackHost(ctx.deps.settings.host))) return checkHost(ctx.req, true);
  secretFor(ctx, 'jobs');
}

/** The job JSON of DESIGN §5. */
function jobJson(job: JobRow): Record<string, unknown> {
  return {
    id: job.id,
    origin: job.origin,
    repo: job.repo,
    status: job.status,
    brief: job.brief,
    args: job.args,
    created_at: iso(job.created_at),
    started_at: iso(job.started_at),
    finished_at: iso(job.finished_at),
    run: job.run_source !== null && job.run_id !== null ? { source: job.run_source, run: job.run_id } : null,
    exit_code: job.exit_code,
    summary: job.summary,
    error: job.error,
    infra_retries: job.infra_retries,
    requeues: job.requeues,
  };
}

export function getJob(ctx: TCtx): Reply {
  mayRead(ctx);
  const id = ctx.params.id ?? '';
  if (!JOB_ID.test(id)) {
    throw new HttpError('invalid_param', 'Job id must look like "j" followed by 26 base32 characters');
  }
  const job = ctx.deps.queue.get(id);
  if (!job) throw new HttpError('not_found', `No job "${id}"`);
  // Who answered its run from where the job was asked, and what was refused (answers.ts).
  const answers = ctx.deps.answers.of(id).map((a) => ({ ...a, at: iso(a.at) }));
  return json(200, { ...jobJson(job), answers });
}
