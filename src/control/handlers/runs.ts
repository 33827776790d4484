// Run list (keyset paged, filtered), run detail and delete, and the stats over the list's window (computed on the
// expensive-reads thread). Parsing lives in ../params.ts, SQL in src/db/runs-store.ts.
import { HttpError } from '../../http/http-error.ts';
import type { Ctx, Handler } from '../../http/pipeline.ts';
import { unauthorized } from '../../http/guards.ts';
import { json, jsonPage } from '../../http/respond.ts';
import type { ControlDeps } from '../deps.ts';
import type { RunFilter, RunRow } from '../../db/run-types.ts';
import type { StatsFilter } from '../../db/stats-store.ts';
import { VERDICTS, RUN_STATUSES, FAILURE_CLASSES } from '../../run-json.ts';
import {
  checkSegment, decodeCursor, encodeCursor, invalidParam, parseEnum, parseLimit, parseWindow, runParams,
  storedRun,
} from '../params.ts';
import { runToJson } from '../../db/runs-store.ts';
import { isArtifactPath } from '../../engine/run-event.ts';
import { transaction } from '../../db/open.ts';
import type { ControlStores } from '../../db/control-stores.ts';
import { str } from '../../untrusted.ts';
import { eventData } from '../event-bus.ts';
import { iso } from '../../iso-time.ts';
import { actionRefusals } from '../action-rules.ts';
import { checkSignedReceipt } from '../run-receipt.ts';
import { errorMessage } from '../../errors.ts';

function parseRunFilter(query: URLSearchParams): RunFilter {
  const filter: RunFilter = { limit: parseLimit(query.get('limit')), ...parseWindow(query) };
  const given = query.get('verdict');
  const verdict = given === null ? undefined : parseEnum('verdict', given, [...VERDICTS, 'none']);
  // `none` selects runs that have no receipt yet (verdict null).
  if (verdict !== undefined) filter.verdict = verdict === 'none' ? null : verdict;
  const group = query.get('group_id');
  if (group !== null) filter.group_id = checkSegment('group_id', group);
  const source = query.get('source');
  if (source !== null) filter.source = checkSegment('source', source);
  const status = query.get('status');
  if (status !== null) filter.status = parseEnum('status', status, RUN_STATUSES);
  const failure = query.get('failure');
  if (failure !== null) filter.failure_class = parseEnum('failure', failure, FAILURE_CLASSES);
  const cursor = query.get('cursor');
  if (cursor !== null) {
    const [started_at, source, run] = decodeCursor(cursor, ['int', 'segment', 'segment']) as [number, string, string];
    filter.after = { started_at, source, run };
  }
  return filter;
}

export const listRuns: Handler<ControlDeps> = (ctx) => {
  const { items, next } = ctx.deps.stores.runs.page(parseRunFilter(ctx.query));
  return jsonPage(items, next ? encodeCursor([next.started_at, next.source, next.run]) : null);
};

/** Attempts listed per group at most (a retry chain is short; this bounds a hostile one). */
const MAX_ATTEMPTS = 100;

function pendingAnswer(stores: ControlStores, row: RunRow) {
  if (row.status !== 'blocked') return null;
  // Only an answer the Control Plane took (its own seq, below 0) waits for the run: a runner's says the run took one,
  // and in a pod it is the agent's line (events.jsonl is its to write), never an answer someone sent; nor does one
  // shipped after it hide it.
  const answer = stores.events.latestOwn(row.source, row.run, 'answer');
  if (!answer) return null;
  // A question asked after the answer is a new one: the old answer is no longer waiting for it.
  const question = stores.events.latest(row.source, row.run, 'question');
  if (question && question.id > answer.id) return null;
  const request = stores.controlRequests.latest(row.source, row.run, 'answer');
  const viaIngest = request !== undefined && request.created_at >= answer.ts;
  return {
    answer: str(eventData(answer.data).answer) ?? '',
    answered_at: iso(answer.ts)!,
    via: viaIngest ? 'ingest' : 'answer_folder',
    delivered_at: viaIngest ? iso(request.delivered_at) : iso(answer.ts),
  };
}

/**
 * The run's retry chain: its own source's runs of its group. A group id is a run id a runner names, and every retry
 * (the Control Plane's, `svc start --retry`) stays in its run's source, so another source's runner naming this group
 * may not add to what this run shows (docs/control-data.md, run detail).
 */
function attempts(stores: ControlStores, row: RunRow) {
  return stores.runs
    .list({ source: row.source, group_id: row.group_id, limit: MAX_ATTEMPTS })
    .reverse()
    .map((r) => ({
      source: r.source, run: r.run, status: r.status, verdict: r.verdict, started_at: iso(r.started_at)!,
    }));
}

/** A runner token reads a run only with a `read=` grant naming its source: a trigger's, of its pods' runs. */
function checkRunnerRead(ctx: Ctx<ControlDeps>): void {
  if (ctx.runner === undefined) return;
  const reads = ctx.runner.reads ?? [];
  if (reads.length === 0) throw unauthorized();
  if (!reads.includes(ctx.params.source ?? '')) {
    const named = reads.map((source) => `"${source}"`).join(', ');
    throw new HttpError('forbidden_source', `This token may only read runs of source ${named}`);
  }
}

export const getRun: Handler<ControlDeps> = (ctx) => {
  checkRunnerRead(ctx);
  const { source, run } = runParams(ctx);
  const row = storedRun(ctx.deps.stores.runs, { source, run });
  const { stores } = ctx.deps;
  // A name ingest refuses now (a credential in it) stored before it did: shown it would show the credential, and its
  // GET answers 400 (docs/control-data.md).
  const artifacts = stores.artifacts
    .list(source, run)
    .filter((a) => isArtifactPath(a.path))
    .map((a) => ({ path: a.path, content_type: a.content_type, size: a.size, sha256: a.sha256 }));
  return json(200, {
    ...runToJson(row),
    artifacts,
    pending_answer: pendingAnswer(stores, row),
    attempts: attempts(stores, row),
    refusals: actionRefusals(ctx.deps, row),
    key_moved: stores.runs.keyMoved(source, run),
    receipt_check: artifacts.some((a) => a.path === 'receipt.json') ? receiptCheck(ctx.deps, row) : null,
  });
};

/** Whether the stored receipt.json is signed by a key this Control Plane knows: only then is it shown as a receipt
 * (docs/control-data.md, run detail). A read: it makes no signing key, and a key it cannot read is the check's
 * problem, not the run detail's failure. */
function receiptCheck(deps: ControlDeps, row: RunRow) {
  let check: ReturnType<typeof checkSignedReceipt>;
  try {
    check = checkSignedReceipt(deps, row, false);
  } catch (err) {
    deps.log.warn('receipt not checked', { source: row.source, run: row.run, error: errorMessage(err) });
    return { signed_by: null, problem: `The receipt could not be checked: ${errorMessage(err)}`, unknown_kid: null,
      sha256: null };
  }
  if (check.ok) return { signed_by: check.signer, problem: null, unknown_kid: null, sha256: check.sha256 };
  const unknownKid = check.unknownKid ?? null;
  return { signed_by: null, problem: check.reason, unknown_kid: unknownKid, sha256: check.sha256 ?? null };
}

export const deleteRun: Handler<ControlDeps> = (ctx) => {
  const { source, run } = runParams(ctx);
  const { stores } = ctx.deps;
  // With its record, in one transaction: a delete whose record was not written would come back with the runner's
  // next batch, and could not be asked again (404).
  const outcome = transaction(ctx.deps.db, () => {
    const done = stores.runs.delete(source, run);
    // So its runner re-shipping it does not bring it back.
    if (done === 'deleted') stores.deletedRuns.add(source, run, ctx.deps.clock());
    return done;
  });
  if (outcome === 'not_found') throw new HttpError('not_found', `Run ${source}/${run} not found`);
  if (outcome === 'active') {
    throw new HttpError('invalid_transition', `Run ${source}/${run} is still active; stop it before deleting`);
  }
  return json(200, { deleted: true });
};

/** The window of GET /v1/runs, where `until` before `since` is a mistake worth naming. */
function filterOf(query: URLSearchParams): StatsFilter {
  const filter = parseWindow(query);
  if (filter.since !== undefined && filter.until !== undefined && filter.until < filter.since) {
    invalidParam('Parameter "until" is before "since"');
  }
  return filter;
}

export const getStats: Handler<ControlDeps> = async (ctx) =>
  json(200, await ctx.deps.reads.stats(filterOf(ctx.query)));

export const getCostStats: Handler<ControlDeps> = async (ctx) =>
  json(200, await ctx.deps.reads.cost(filterOf(ctx.query)));
