// Renders runs for people: a fixed-column table for lists, key/value lines for one run. No I/O here.
import type { Run } from '../client/types.ts';
import { oneLine } from './terminal-text.ts';

const COLUMNS: Array<{ title: string; width: number; value: (r: Run) => string }> = [
  { title: 'RUN', width: 34, value: (r) => `${r.source}/${r.run}` },
  { title: 'STATUS', width: 9, value: (r) => r.status },
  { title: 'VERDICT', width: 18, value: (r) => r.verdict ?? '-' },
  { title: 'REPO', width: 20, value: (r) => r.repo ?? '-' },
  { title: 'STARTED', width: 16, value: (r) => shortTime(r.started_at) },
  { title: 'BRIEF', width: 0, value: (r) => oneLine(r.brief ?? '') },
];

function shortTime(iso: string | null): string {
  if (!iso) return '-';
  return iso.replace('T', ' ').slice(0, 16);
}

function fit(text: string, width: number): string {
  if (width === 0) return text.length > 60 ? `${text.slice(0, 59)}…` : text;
  const clean = oneLine(text);
  return clean.length > width ? `${clean.slice(0, width - 1)}…` : clean.padEnd(width);
}

export function formatRunTable(runs: Run[]): string {
  if (runs.length === 0) return 'No runs\n';
  const head = COLUMNS.map((c) => fit(c.title, c.width)).join('  ').trimEnd();
  const rows = runs.map((r) => COLUMNS.map((c) => fit(c.value(r), c.width)).join('  ').trimEnd());
  return `${[head, ...rows].join('\n')}\n`;
}

const DETAIL_FIELDS: Array<keyof Run> = [
  'status', 'verdict', 'repo', 'brief', 'question', 'origin', 'provider', 'branch', 'pr_url', 'group_id',
  'started_at', 'ended_at', 'updated_at', 'cost_usd', 'tokens_in', 'tokens_out', 'exit_code', 'error',
];

export function formatRunDetails(run: Run): string {
  const lines = [`run       ${oneLine(`${run.source}/${run.run}`)}`];
  for (const key of DETAIL_FIELDS) {
    const value = run[key];
    if (value === null || value === undefined || value === '') continue;
    if (key === 'question' && run.status !== 'blocked') continue;
    lines.push(`${String(key).padEnd(9)} ${oneLine(String(value))}`);
  }
  if (run.cost_usd === null) lines.push('cost_usd  unknown');
  return `${lines.join('\n')}\n`;
}
