// The one-line completion summary every origin receives: status, verdict, PR URL, cost, duration, Control Plane link.
import type { RunOutcome, RunRef } from './executor.ts';

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return 'unknown';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

/** Where a person can look at the run; null when no Control Plane address is known. */
export function runLink(controlUrl: string | undefined, run: RunRef): string | null {
  if (!controlUrl) return null;
  return `${controlUrl.replace(/\/+$/, '')}/#/runs/${encodeURIComponent(run.source)}/${encodeURIComponent(run.run)}`;
}

export interface SummaryInput {
  jobId: string;
  status: string;
  run: RunRef | null;
  outcome: RunOutcome | null;
  durationMs: number;
  error: string | null;
  controlUrl: string | undefined;
}

export function buildSummary(input: SummaryInput): string {
  const parts = [`svc job ${input.jobId} ${input.status}`];
  if (input.run) parts.push(`run ${input.run.source}/${input.run.run}`);
  const o = input.outcome;
  if (o) {
    parts.push(`verdict ${o.verdict ?? 'none'}`);
    parts.push(o.pr_url ? `PR ${o.pr_url}` : 'no PR');
    parts.push(o.cost_usd === null ? 'cost unknown' : `cost $${o.cost_usd.toFixed(2)}`);
  }
  parts.push(`took ${formatDuration(input.durationMs)}`);
  if (input.error) parts.push(`error: ${input.error}`);
  const link = input.run ? runLink(input.controlUrl, input.run) : null;
  if (link) parts.push(link);
  return parts.join(' · ');
}
