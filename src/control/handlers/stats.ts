// GET /v1/stats and /v1/stats/cost, computed on the expensive-reads thread (src/control/expensive-reads.ts).
import { json } from '../../http/respond.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';
import { checkQueryKeys, invalidParam, parseWindow } from '../params.ts';
import type { StatsFilter } from '../../db/stats-store.ts';

/** The window of GET /v1/runs, where `until` before `since` is a mistake worth naming. */
function filterOf(query: URLSearchParams): StatsFilter {
  checkQueryKeys(query, ['since', 'until', 'repo']);
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
