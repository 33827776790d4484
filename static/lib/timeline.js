// @ts-check
// A run's story as spans on one time axis, built from its events (DESIGN §3 Events). Pure, so it is unit-tested in
// Node: queued (start until the first move to running), each provider invocation (its "provider … started" line
// until its cost, a check, the receipt, the next invocation or the end), blocked waits (question until the run
// leaves blocked), checks (ending at their event, as long as they took) and point marks for receipt, PR and errors.
// Only svc's own lines (event-text.js isSvcLine) start a provider span or a retry mark: a pod's run container's are
// marked, since its agent can write them.
import { TERMINAL } from './run-status.js';
import { containers, isSvcLine } from './event-text.js';

/** @typedef {{id: number, kind: string, data: any, ts: number | null}} TimelineEvent */
/**
 * @typedef {{kind: 'queued' | 'provider' | 'blocked' | 'check', start: number, end: number, label: string,
 *   ok?: boolean, open?: boolean}} Span
 */
/** @typedef {{kind: 'receipt' | 'pr' | 'error' | 'retry', at: number, label: string}} Mark */
/** @typedef {{start: number, end: number, live: boolean, spans: Span[], marks: Mark[]}} Timeline */

// Runs recorded before the engine wrote `provider` and `attempt` as fields only have the line's text.
const OLD_PROVIDER_START = /^provider (\S+) started(?: \(attempt (\d+)\))?/;

/**
 * The provider invocation a `log` event starts: its fields, else (older runs) its text; null for any other line.
 * @param {any} d
 * @returns {{name: string, attempt: number | null} | null}
 */
function providerStart(d) {
  if (!isSvcLine(d)) return null;
  if (typeof d.provider === 'string' && d.provider) {
    return { name: d.provider, attempt: Number.isInteger(d.attempt) ? d.attempt : null };
  }
  const m = typeof d.text === 'string' ? OLD_PROVIDER_START.exec(d.text) : null;
  return m ? { name: /** @type {string} */ (m[1]), attempt: m[2] ? Number(m[2]) : null } : null;
}

/**
 * @param {{started_at?: string | null, ended_at?: string | null, status?: string}} run
 * @param {TimelineEvent[]} events any order; sorted by id here
 * @param {number} now the end of open spans while the run is live
 * @returns {Timeline | null}
 */
export function buildTimeline(run, events, now) {
  const sorted = events
    .filter((e) => typeof e.ts === 'number' && Number.isFinite(e.ts))
    .sort((a, b) => a.id - b.id);
  const startedAt = run.started_at ? Date.parse(run.started_at) : NaN;
  const start = Number.isFinite(startedAt) ? startedAt : sorted[0]?.ts ?? null;
  if (start === null || start === undefined) return null;
  const endedAt = run.ended_at ? Date.parse(run.ended_at) : NaN;
  const lastTs = sorted.length ? Math.max(...sorted.map((e) => /** @type {number} */ (e.ts))) : start;
  const live = !Number.isFinite(endedAt) && !TERMINAL.has(run.status ?? '');
  const end = Math.max(start + 1, Number.isFinite(endedAt) ? endedAt : live ? now : lastTs, lastTs);
  /** @type {Span[]} */
  const spans = [];
  /** @type {Mark[]} */
  const marks = [];
  /** @type {Span | null} */
  let provider = null;
  /** @type {Span | null} */
  let blocked = null;
  let sawRunning = false;
  const closeProvider = (/** @type {number} */ at) => {
    if (provider) {
      provider.end = Math.max(provider.start, at);
      delete provider.open;
    }
    provider = null;
  };
  const closeBlocked = (/** @type {number} */ at) => {
    if (blocked) {
      blocked.end = Math.max(blocked.start, at);
      delete blocked.open;
    }
    blocked = null;
  };
  for (const e of sorted) {
    const at = /** @type {number} */ (e.ts);
    const d = e.data && typeof e.data === 'object' ? e.data : {};
    if (e.kind === 'run.status') {
      // A resume's move to running is no first start: its queued time is not from the run's start.
      if (!sawRunning && d.to === 'running' && d.resumed !== true) {
        sawRunning = true;
        if (d.from === 'queued' && at > start) spans.push({ kind: 'queued', start, end: at, label: 'queued' });
      }
      if (d.from === 'blocked' && d.to !== 'blocked') closeBlocked(at);
      if (d.to === 'blocked' && !blocked) {
        blocked = { kind: 'blocked', start: at, end: end, label: 'blocked', open: true };
        spans.push(blocked);
      }
      if (TERMINAL.has(String(d.to))) {
        closeProvider(at);
        closeBlocked(at);
      }
    } else if (e.kind === 'log' && isSvcLine(d) && d.retry === 'automatic') {
      // The worker started the run over after an infra failure before its agent ran ("retried automatically …").
      closeProvider(at);
      marks.push({ kind: 'retry', at, label: String(d.text ?? 'retried automatically') });
    } else if (e.kind === 'log' && providerStart(d)) {
      closeProvider(at);
      const started = /** @type {{name: string, attempt: number | null}} */ (providerStart(d));
      const label = `provider ${started.name}${started.attempt !== null ? ` (attempt ${started.attempt})` : ''}`;
      provider = { kind: 'provider', start: at, end, label, open: true };
      spans.push(provider);
    } else if (e.kind === 'question') {
      const q = String(d.question ?? d.text ?? '');
      if (blocked) blocked.label = `blocked: ${q}`;
      else {
        blocked = { kind: 'blocked', start: at, end: end, label: `blocked: ${q}`, open: true };
        spans.push(blocked);
      }
    } else if (e.kind === 'cost') {
      closeProvider(at);
    } else if (e.kind === 'check') {
      closeProvider(at);
      const took = Number(d.duration_ms);
      const from = Number.isFinite(took) && took > 0 ? Math.max(start, at - took) : at;
      const ok = d.exit_code === 0;
      const result = ok ? 'passed' : `failed (exit ${d.exit_code ?? '?'})`;
      spans.push({ kind: 'check', start: from, end: at, ok, label: `check ${d.name ?? ''} ${result}${containers(d)}` });
    } else if (e.kind === 'receipt') {
      closeProvider(at);
      const verdict = d.verdict ? `: ${String(d.verdict).replace(/_/g, ' ')}` : '';
      marks.push({ kind: 'receipt', at, label: `Evidence Receipt${verdict}` });
    } else if (e.kind === 'pr') {
      const label = d.opened === false ? `no pull request: ${d.reason ?? ''}` : `pull request ${d.url ?? ''}`;
      marks.push({ kind: 'pr', at, label });
    } else if (e.kind === 'error') {
      marks.push({ kind: 'error', at, label: `error: ${d.message ?? ''}${containers(d)}` });
    }
  }
  // Spans still open run to the end (now, while the run is live; they are marked open only then).
  for (const s of spans) {
    if (!s.open) continue;
    s.end = end;
    if (!live) delete s.open;
  }
  return { start, end, live, spans, marks };
}
