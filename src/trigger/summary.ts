// The one-line completion summary every origin receives (status, verdict, PR, cost, duration, run link), and what a
// source's reply channel is (its sender and renderer are beside its handler, trigger/sources/<name>.ts).
import { FailedError } from '../errors.ts';
import { redactSecrets } from '../engine/text.ts';
import { capUtf8, oneLine } from '../one-line.ts';
import { runPageUrl, VERDICTS } from '../run-json.ts';
import type { RunOutcome } from './run-follow.ts';
import type { RunRef } from '../client/types.ts';

export interface NotifyConfig {
  /** chata summaries go only to response_urls under this https prefix. */
  chataHooksPrefix: string;
  trackeraApiUrl: string;
  trackeraApiKey: string | undefined;
  trackerb: { baseUrl: string; email: string; token: string } | undefined;
  /** A chata bot token: chat.postMessage once the response_url expired, and a question's thread. */
  chataBot?: { apiUrl: string; token: string } | undefined;
  /** GitHub's REST base and token: the progress comment on a GitHub issue. */
  github?: { apiUrl: string; token: string } | undefined;
}

/** A message ready to send: only the URL's host is ever reported. */
export interface Delivery {
  url: URL;
  headers: Record<string, string>;
  body: string;
  /** Names the answerer in errors ("trackera API"). */
  what: string;
  /** Throws PermanentError when a 2xx answer still says no (trackera's GraphQL errors). */
  check?: (answer: string) => void;
  method?: 'POST' | 'PATCH';
  /** What to keep with the job's reply target from a 2xx answer (the id of the comment it made), if anything. */
  remember?: (answer: string) => Record<string, unknown> | null;
}

/** A source's way back (its record's `reply`); notify.ts picks it by channel name. */
export interface ReplyChannel {
  /** Whether its settings are there (GET /status). */
  configured(config: NotifyConfig): boolean;
  /** A message in the vendor's format, or why nothing is sent; `now` decides whether an expiring address holds. */
  prepare(target: Record<string, unknown>, parts: SummaryParts, config: NotifyConfig, now: number): Delivery | string;
  /** A message of its own beside the one `prepare` keeps up to date (GitHub); absent: `prepare` serves. */
  note?(target: Record<string, unknown>, parts: SummaryParts, config: NotifyConfig): Delivery | string;
  /** A question where a reply in its thread answers it (chata's bot message); absent: `prepare` serves. */
  ask?(target: Record<string, unknown>, parts: SummaryParts, config: NotifyConfig, now: number): Delivery | string;
  /** Told that the run started too (GitHub's one progress comment). */
  progress?: boolean;
}

/** An answer that will not get better by retrying; the notifier retries anything else. */
export class PermanentError extends FailedError {}

/** Between a summary's parts, in every vendor's rendering. */
export const SEPARATOR = ' · ';

function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return 'unknown';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

/** The run's page (SVC_PUBLIC_URL) as a summary part, or where to look it up instead: never a loopback link. */
function runPart(publicUrl: string | undefined, run: RunRef): Piece[] {
  const link = safeLink(publicUrl ? runPageUrl(publicUrl, run.source, run.run) : null);
  return link ? [{ link }] : [{ own: `see run ${run.source}/${run.run} on the Control Plane` }];
}

/** `own`: svc's own words; `data`: agent-derived text, fenced as data for every vendor; `link`: a URL svc links. */
export type Piece = { own: string } | { data: string } | { link: string };
/** The parts, each shown as its pieces side by side, parts separated by SEPARATOR. */
export type SummaryParts = Piece[][];

const DATA_BYTES = 500;

/** Agent- or vendor-given text as a `data` piece: one line without secrets (a run's error may quote a remote with its
 * token), cut to DATA_BYTES of UTF-8, never inside a character. */
export function data(text: string): Piece {
  const line = oneLine(redactSecrets(text));
  const cut = capUtf8(line, DATA_BYTES);
  return { data: cut === line ? line : `${cut}…` };
}

// An http(s) URL as the WHATWG parser writes it, with nothing a vendor takes as markup (`<>|` close Slack links;
// brackets, quotes, `*` and spaces make markdown); else null, and the text is shown as data.
function safeLink(value: string | null | undefined): string | null {
  const url = value && value.length <= 2048 ? URL.parse(value) : null;
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) return null;
  return /[\s<>|()[\]'"*`\\]/.test(url.href) ? null : url.href;
}

export function buildSummaryParts(input: {
  jobId: string;
  status: string;
  run: RunRef | null;
  outcome: RunOutcome | null;
  durationMs: number;
  error: string | null;
  /** SVC_PUBLIC_URL (never a loopback address). */
  publicUrl: string | undefined;
}): SummaryParts {
  const parts: SummaryParts = [[{ own: `svc job ${input.jobId} ${input.status}` }]];
  if (input.run) parts.push([{ own: `run ${input.run.source}/${input.run.run}` }]);
  const o = input.outcome;
  if (o) {
    const verdict = o.verdict ?? 'none';
    parts.push([{ own: 'verdict ' }, [...VERDICTS, 'none'].includes(verdict) ? { own: verdict } : data(verdict)]);
    const pr = safeLink(o.pr_url);
    if (pr) parts.push([{ own: 'PR ' }, { link: pr }]);
    else parts.push(o.pr_url ? [{ own: 'PR ' }, data(o.pr_url)] : [{ own: 'no PR' }]);
    const known = o.cost_usd !== null && Number.isFinite(o.cost_usd);
    parts.push([{ own: known ? `cost $${o.cost_usd!.toFixed(2)}` : 'cost unknown' }]);
  }
  parts.push([{ own: `took ${formatDuration(input.durationMs)}` }]);
  if (input.error) parts.push([{ own: 'error: ' }, data(input.error)]);
  if (input.run) parts.push(runPart(input.publicUrl, input.run));
  return parts;
}

/** How far a webhook-started run got, as its origin is told while it runs. */
export type Progress = { step: 'started' } | { step: 'waiting'; question: string } | { step: 'answered'; by: string }
  | { step: 'resumed' };

/** A progress message: svc's words, the run's question as data, the run's link. */
export function buildProgressParts(
  jobId: string, run: RunRef, progress: Progress, publicUrl: string | undefined,
): SummaryParts {
  const parts: SummaryParts = [];
  if (progress.step === 'started') parts.push([{ own: `svc job ${jobId} started` }]);
  else if (progress.step === 'answered') {
    parts.push([{ own: `svc job ${jobId} was answered by ` }, data(progress.by), { own: ' and continues' }]);
  } else if (progress.step === 'waiting') {
    parts.push([{ own: `svc job ${jobId} is waiting for an answer` }]);
    parts.push([{ own: 'question: ' }, data(progress.question)]);
    parts.push([{ own: `answer with "${ANSWER_COMMAND} <your answer>"` }]);
  }
  parts.push(runPart(publicUrl, run));
  return parts;
}

/** What a person writes at the origin (a chat command, an issue comment) to answer a waiting run. */
export const ANSWER_COMMAND = '/svc answer';

/** The parts in one vendor's markup. */
export function renderSummary(parts: SummaryParts, piece: (p: Piece) => string, separator = SEPARATOR): string {
  return parts.map((part) => part.map(piece).join('')).join(separator);
}

/** The plain one-line summary (GET /jobs, logs, the Control Plane report). */
export function plainSummary(parts: SummaryParts): string {
  return renderSummary(parts, (p) => ('own' in p ? p.own : 'data' in p ? p.data : p.link));
}

/** CommonMark lets any ASCII punctuation be backslash-escaped; svc's own words never need markup. */
function markdownEscape(text: string): string {
  return text.replace(/[!-/:-@[-`{-~]/g, (c) => `\\${c}`);
}

/** A CommonMark code span holding `text` literally. */
function codeSpan(text: string): string {
  if (text === '') return '';
  const longest = Math.max(0, ...(text.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  const pad = text.startsWith('`') || text.endsWith('`') || (text.startsWith(' ') && text.endsWith(' ')) ? ' ' : '';
  return `${fence}${pad}${text}${pad}${fence}`;
}

function markdownPiece(piece: Piece): string {
  if ('own' in piece) return markdownEscape(piece.own);
  if ('link' in piece) return `<${piece.link}>`;
  return codeSpan(piece.data);
}

/** The parts in CommonMark: trackera's comments and GitHub's read it the same way. */
export function markdownSummary(parts: SummaryParts): string {
  return renderSummary(parts, markdownPiece, markdownEscape(SEPARATOR));
}
