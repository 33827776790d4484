// Run events as a paged list and as SSE streams (per run and across runs).
import type { Ctx, Handler } from '../../http/pipeline.ts';
import { TAKEN_OVER, jsonPage, type HandlerResult } from '../../http/respond.ts';
import type { ControlDeps } from '../deps.ts';
import { eventJson } from '../event-bus.ts';
import { streamEvents } from '../event-stream.ts';
import { checkSegment, invalidParam, parseId, parseLimit, runParams, storedRun } from '../params.ts';

function requireRun(ctx: Ctx<ControlDeps>): { source: string; run: string } {
  const key = runParams(ctx);
  storedRun(ctx.deps.stores.runs, key);
  return key;
}

/** Where a stream resumes: the Last-Event-ID header (set by EventSource on reconnect) wins over ?after=. */
function resumeAfter(ctx: Ctx<ControlDeps>, fallback: () => number): number {
  const header = ctx.req.headers['last-event-id'];
  if (typeof header === 'string' && header.trim() !== '') return parseId('Last-Event-ID', header.trim());
  const after = ctx.query.get('after');
  return after === null ? fallback() : parseId('after', after);
}

export const listEvents: Handler<ControlDeps> = (ctx) => {
  const { source, run } = requireRun(ctx);
  const after = ctx.query.get('after');
  const cursor = ctx.query.get('cursor');
  if (after !== null && cursor !== null) invalidParam('Give "after" or "cursor", not both');
  const from = cursor !== null ? parseId('cursor', cursor) : after !== null ? parseId('after', after) : 0;
  const limit = parseLimit(ctx.query.get('limit'));
  const rows = ctx.deps.stores.events.listAll({ source, run, after: from, limit: limit + 1 });
  const page = rows.slice(0, limit);
  return jsonPage(page.map(eventJson), rows.length > limit ? String(page[page.length - 1]!.id) : null);
};

export const streamRun: Handler<ControlDeps> = async (ctx): Promise<HandlerResult> => {
  await streamEvents(ctx.deps, ctx.res, requireRun(ctx), resumeAfter(ctx, () => 0));
  return TAKEN_OVER;
};

export const streamAll: Handler<ControlDeps> = async (ctx): Promise<HandlerResult> => {
  const source = ctx.query.get('source');
  const run = ctx.query.get('run');
  if (run !== null && source === null) invalidParam('Parameter "run" needs "source"');
  const scope = {
    ...(source !== null ? { source: checkSegment('source', source) } : {}),
    ...(run !== null ? { run: checkSegment('run', run) } : {}),
  };
  // Without a resume point the cross-run stream starts live.
  await streamEvents(ctx.deps, ctx.res, scope, resumeAfter(ctx, () => ctx.deps.stores.events.maxId()));
  return TAKEN_OVER;
};
