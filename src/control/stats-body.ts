// The bodies of GET /v1/stats and /v1/stats/cost, on the expensive-reads thread or the main thread alike.
import { TERMINAL_STATUSES } from '../run-json.ts';
import { iso } from '../iso-time.ts';
import { DAY_MS, type CostGroup, type StatsFilter, type StatsStore } from '../db/stats-store.ts';

function window(f: StatsFilter) {
  return { since: iso(f.since ?? null), until: iso(f.until ?? null), repo: f.repo ?? null };
}

function dateOf(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

export function statsBody(stats: StatsStore, f: StatsFilter): Record<string, unknown> {
  const { runs, byStatus, byVerdict } = stats.counts(f);
  const terminal = TERMINAL_STATUSES.reduce((sum, s) => sum + (byStatus[s] ?? 0), 0);
  const duration = stats.durationPercentiles(f, [0.5, 0.95]);
  return {
    ...window(f),
    runs,
    by_status: byStatus,
    by_verdict: byVerdict,
    terminal,
    // succeeded / (succeeded + failed + stopped); null when nothing has finished, rather than a fake 0 or 1.
    success_rate: terminal === 0 ? null : (byStatus.succeeded ?? 0) / terminal,
    duration_ms: { ended: duration.ended, p50: duration.values[0] ?? null, p95: duration.values[1] ?? null },
    per_day: stats.runsPerDay(f).map((d) => ({
      date: dateOf(Number(d.day)), runs: Number(d.runs), succeeded: Number(d.succeeded), failed: Number(d.failed),
    })),
  };
}

/** Sums of floats drift (0.1 + 0.2); micro-dollars are finer than any provider bills. */
function usd(value: number | null): number | null {
  return value === null ? null : Math.round(value * 1e6) / 1e6;
}

function costFigures(g: CostGroup) {
  const runs = Number(g.runs);
  const known = Number(g.runs_with_cost);
  return {
    runs,
    runs_with_cost: known,
    runs_unknown_cost: runs - known,
    cost_usd: usd(g.cost_usd),
    tokens_in: g.tokens_in === null ? null : Number(g.tokens_in),
    tokens_out: g.tokens_out === null ? null : Number(g.tokens_out),
  };
}

export function costBody(stats: StatsStore, f: StatsFilter): Record<string, unknown> {
  const { cost_usd: total, ...figures } = costFigures(stats.costTotal(f));
  return {
    ...window(f),
    total_usd: total,
    ...figures,
    by_provider: stats.costBy(f, 'provider').map((g) => ({ provider: g.key, ...costFigures(g) })),
    by_repo: stats.costBy(f, 'repo').map((g) => ({ repo: g.key, ...costFigures(g) })),
    per_day: stats.costBy(f, 'day').map((g) => ({ date: dateOf(Number(g.key)), ...costFigures(g) })),
  };
}

export const STATS_BODIES = { stats: statsBody, cost: costBody };
