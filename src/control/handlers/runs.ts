// Run list (keyset paged, filtered), run detail and delete. Parsing lives in ../params.ts, SQL in src/db/runs-store.ts.
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import { json, JSON_TYPE } from '../../http/respond.ts';
import type { ControlDeps } from '../deps.ts';
import type { RunFilter } from '../../db/run-types.ts';
import { VERDICTS, RUN_STATUSES, FAILURE_CLASSES, type Verdict, type RunStatus, type FailureClass,
} from '../../run-json.ts';
import {
  checkQueryKeys, checkSegment, decodeRunCursor, encodeRunCursor, parseLimit, parseWindow, runParams,
} from '../params.ts';
import { runToJson } from '../../db/runs-store.ts';
import { pendingAnswer, attempts } from '../run-detail.ts';
import { actionRefusals } from '../action-rules.ts';
import { isRegisteredProject } from '../projects.ts';

const LIST_KEYS = [
  'verdict', 'repo', 'since', 'until', 'group_id', 'status', 'source', 'limit', 'cursor', 'failure',
] as const;

function parseVerdict(value: string): Verdict | null {
  // `none` selects runs that have no receipt yet (verdict null).
  if (value === 'none') return null;
  if ((VERDICTS as readonly string[]).includes(value)) return value as Verdict;
  throw new HttpError('invalid_param', `Parameter "verdict" must be one of ${VERDICTS.join(', ')}, none`);
}

function parseStatus(value: string): RunStatus {
  if ((RUN_STATUSES as readonly string[]).includes(value)) return value as RunStatus;
  throw new HttpError('invalid_param', `Parameter "status" must be one of ${RUN_STATUSES.join(', ')}`);
}

function parseFailure(value: string): FailureClass {
  if ((FAILURE_CLASSES as readonly string[]).includes(value)) return value as FailureClass;
  throw new HttpError('invalid_param', `Parameter "failure" must be one of ${FAILURE_CLASSES.join(', ')}`);
}

function parseRunFilter(query: URLSearchParams): RunFilter {
  checkQueryKeys(query, LIST_KEYS);
  const filter: RunFilter = { limit: parseLimit(query.get('limit')), ...parseWindow(query) };
  const verdict = query.get('verdict');
  if (verdict !== null) filter.verdict = parseVerdict(verdict);
  const group = query.get('group_id');
  if (group !== null) filter.group_id = checkSegment('group_id', group);
  const source = query.get('source');
  if (source !== null) filter.source = checkSegment('source', source);
  const status = query.get('status');
  if (status !== null) filter.status = parseStatus(status);
  const failure = query.get('failure');
  if (failure !== null) filter.failure_class = parseFailure(failure);
  const cursor = query.get('cursor');
  if (cursor !== null) filter.after = decodeRunCursor(cursor);
  return filter;
}

const PAGE_HEADERS = { 'content-type': JSON_TYPE, 'cache-control': 'no-store' };

export const listRuns: Handler<ControlDeps> = (ctx) => {
  const { items, next } = ctx.deps.stores.runs.page(parseRunFilter(ctx.query));
  // JSON.stringify({ items, next_cursor }) byte for byte, with each run's stored text as it is.
  const cursor = next ? JSON.stringify(encodeRunCursor(next)) : 'null';
  return { status: 200, headers: PAGE_HEADERS, body: `{"items":[${items.join(',')}],"next_cursor":${cursor}}` };
};

export const getRun: Handler<ControlDeps> = (ctx) => {
  const { source, run } = runParams(ctx);
  checkQueryKeys(ctx.query, []);
  const row = ctx.deps.stores.runs.get(source, run);
  if (!row) throw new HttpError('not_found', `Run ${source}/${run} not found`);
  // The artifact index (paths only) for `artifact/<path>` links, and why each action would be refused (the same
  // rules the action handlers apply).
  const { stores, settings } = ctx.deps;
  const artifacts = stores.artifacts
    .list(source, run)
    .map((a) => ({ path: a.path, content_type: a.content_type, size: a.size, sha256: a.sha256 }));
  const registered = (path: string): boolean => isRegisteredProject(ctx.deps, path);
  return json(200, {
    ...runToJson(row),
    artifacts,
    pending_answer: pendingAnswer(stores, row),
    attempts: attempts(stores, row),
    refusals: actionRefusals(row, settings.source, registered),
  });
};

export const deleteRun: Handler<ControlDeps> = (ctx) => {
  const { source, run } = runParams(ctx);
  const outcome = ctx.deps.stores.runs.delete(source, run);
  if (outcome === 'not_found') throw new HttpError('not_found', `Run ${source}/${run} not found`);
  if (outcome === 'active') {
    throw new HttpError('invalid_transition', `Run ${source}/${run} is still active; stop it before deleting`);
  }
  // Remembered so its runner re-shipping it (`svc ship`) does not bring it back.
  ctx.deps.stores.deletedRuns.add(source, run, ctx.deps.clock());
  return json(200, { deleted: true });
};
