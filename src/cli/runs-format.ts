// Renders runs for people: a fixed-column table for lists, key/value lines for one run. No I/O here.
import type { Run } from '../client/types.ts';
import { oneLine } from '../one-line.ts';
import { num, obj, str } from '../untrusted.ts';
import { readFailure } from '../run-json.ts';

const COLUMNS: Array<{ title: string; width: number; value: (r: Run) => string }> = [
  { title: 'RUN', width: 34, value: (r) => `${r.source}/${r.run}` },
  { title: 'STATUS', width: 9, value: (r) => r.status },
  { title: 'VERDICT', width: 18, value: (r) => r.verdict ?? '-' },
  { title: 'REPO', width: 20, value: (r) => r.repo ?? '-' },
  { title: 'STARTED', width: 16, value: (r) => r.started_at?.replace('T', ' ').slice(0, 16) || '-' },
  { title: 'BRIEF', width: 0, value: (r) => oneLine(r.brief ?? '') },
];

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

const DETAIL_FIELDS: Array<keyof Run & string> = [
  'status', 'verdict', 'repo', 'brief', 'question', 'origin', 'provider', 'branch', 'pr_url', 'group_id',
  'started_at', 'ended_at', 'updated_at', 'cost_usd', 'tokens_in', 'tokens_out', 'exit_code', 'error', 'failure',
  'trace_id',
];

/** The widest key ("started_at", "updated_at", "tokens_out") plus one space: every value starts in one column. */
export const KEY_WIDTH = Math.max(...DETAIL_FIELDS.map((k) => k.length)) + 1;

/** Dollars with cents, and below a dollar two significant digits ($0.0123 is not $0.01, nor $0.004 $0.00). */
export function formatUsd(usd: number): string {
  if (!Number.isFinite(usd)) return String(usd);
  const abs = Math.abs(usd);
  const decimals = abs >= 1 || abs === 0 ? 2 : Math.min(10, Math.ceil(-Math.log10(abs)) + 2);
  const text = abs.toFixed(decimals).replace(/(\.\d\d\d*?)0+$/, '$1');
  return `${usd < 0 ? '-' : ''}$${text}`;
}

/** A run's failure as one line, `class: reason (retryable)`, read by type alone: the server's answer is untrusted. */
export function failureText(value: unknown): string {
  const failure = readFailure(value);
  if (!failure) return '-';
  return `${failure.class}: ${failure.reason}${failure.retryable ? ' (retryable)' : ''}`;
}

/** `source/run` of a run the server sent, as one line. */
export function runLabel(run: Pick<Run, 'source' | 'run'>): string {
  return oneLine(`${run.source}/${run.run}`);
}

export function formatRunDetails(run: Run): string {
  const lines = [`${'run'.padEnd(KEY_WIDTH)}${runLabel(run)}`];
  for (const key of DETAIL_FIELDS) {
    const value = run[key];
    if (key === 'cost_usd' && value === null) {
      lines.push(`${key.padEnd(KEY_WIDTH)}unknown`);
      continue;
    }
    if (value === null || value === undefined || value === '') continue;
    if (key === 'question' && run.status !== 'blocked') continue;
    const text = key === 'cost_usd' && typeof value === 'number' ? formatUsd(value)
      : oneLine(key === 'failure' ? failureText(value) : String(value));
    lines.push(`${key.padEnd(KEY_WIDTH)}${text}`);
  }
  return `${lines.join('\n')}\n`;
}

const HOSTS_SHOWN = 4;

/** `svc runs show`'s network line from a receipt read by type alone, or null when it has no network section. */
export function networkLine(receipt: unknown): string | null {
  const network = obj(obj(receipt).network);
  if (typeof network.confined !== 'boolean') return null;
  if (!network.confined) return 'not confined (no sandbox): the agent could reach any host';
  const hosts = Array.isArray(network.hosts) ? network.hosts.map(obj) : [];
  const names = hosts.slice(0, HOSTS_SHOWN).map((h) => `${oneLine(str(h.host) ?? '?')}:${num(h.port)}`);
  const more = hosts.length > HOSTS_SHOWN ? ` and ${hosts.length - HOSTS_SHOWN} more` : '';
  const reached = hosts.length ? ` to ${names.join(', ')}${more}` : '';
  return `through the gate: ${num(network.connections)} connections${reached}, ${num(network.denied)} denied`;
}
