// GET /v1/stats and /v1/stats/cost: run counts, success rate, durations and cost over an optional window and repo.
// Computed on the expensive-reads thread (src/control/expensive-reads.ts), so a client looping them over random
// windows never holds up anyone else's requests; past its queue they are 503 unavailable with Retry-After.
import { json } from '../../http/respond.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';
import { HttpError } from '../../http/http-error.ts';
import { checkQueryKeys, optionalTime } from '../params.ts';
import type { StatsFilter } from '../../db/stats-store.ts';

/** `since` (inclusive), `until` (exclusive), `repo`: the same filters and formats as GET /v1/runs. */
function filterOf(query: URLSearchParams): StatsFilter {
  checkQueryKeys(query, ['since', 'until', 'repo']);
  const since = optionalTime(query, 'since');
  const until = optionalTime(query, 'until');
  const repo = query.get('repo');
  if (repo !== null && (repo.length === 0 || repo.length > 512)) {
    throw new HttpError('invalid_param', 'Parameter "repo" must be a repository name');
  }
  if (since !== undefined && until !== undefined && until < since) {
    throw new HttpError('invalid_param', 'Parameter "until" is before "since"');
  }
  return {
    ...(since !== undefined ? { since } : {}),
    ...(until !== undefined ? { until } : {}),
    ...(repo !== null ? { repo } : {}),
  };
}

export const getStats: Handler<ControlDeps> = async (ctx) => {
  const filter = filterOf(ctx.query);
  return json(200, await ctx.deps.reads.stats(filter));
};

export const getCostStats: Handler<ControlDeps> = async (ctx) => {
  const filter = filterOf(ctx.query);
  return json(200, await ctx.deps.reads.cost(filter));
};
