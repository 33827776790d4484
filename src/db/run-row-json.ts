// A runs row as Run JSON (DESIGN §3): the one place a stored row becomes the wire's object, times as ISO strings.
import type { RunJson } from '../run-json.ts';
import type { RunRow } from './run-types.ts';

import { iso } from '../iso-time.ts';

/** DESIGN §3 Run JSON. `repo_path`, `pid` and `extra` are internal and never leave the server. */
export function runToJson(row: RunRow): RunJson {
  return {
    source: row.source,
    run: row.run,
    repo: row.repo,
    group_id: row.group_id,
    status: row.status,
    verdict: row.verdict,
    brief: row.brief,
    origin: row.origin,
    provider: row.provider,
    branch: row.branch,
    pr_url: row.pr_url,
    question: row.question,
    started_at: iso(row.started_at),
    ended_at: iso(row.ended_at),
    updated_at: iso(row.updated_at),
    cost_usd: row.cost_usd,
    tokens_in: row.tokens_in,
    tokens_out: row.tokens_out,
    exit_code: row.exit_code,
    error: row.error,
  };
}
