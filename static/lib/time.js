// @ts-check
// The one place the UI formats times. Absolute times are local, 24-hour, one shape everywhere:
// "2026-11-24 01:10" (seconds, "01:10:05", where order matters: logs, audit). Relative times ("3m ago") always
// carry the absolute ISO time with its zone on hover. Pure apart from the browser's zone, so it runs in Node too.
import { html } from './html.js';

/** Milliseconds of an ISO string or ms number, or null. @param {string | number | null | undefined} t */
export function toMs(t) {
  if (t === null || t === undefined || t === '') return null;
  const ms = typeof t === 'number' ? t : Date.parse(t);
  return Number.isFinite(ms) ? ms : null;
}

const pad = (/** @type {number} */ n) => String(n).padStart(2, '0');

/** The local day, "2026-11-24". @param {string | number | null | undefined} t */
export function day(t) {
  const ms = toMs(t);
  if (ms === null) return '—';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** Local clock time, "01:10" or with seconds "01:10:05". @param {string | number | null | undefined} t */
export function clock(t, seconds = true) {
  const ms = toMs(t);
  if (ms === null) return '';
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}${seconds ? `:${pad(d.getSeconds())}` : ''}`;
}

/**
 * The absolute format: "2026-11-24 01:10" (or "…:05" with seconds).
 * @param {string | number | null | undefined} t
 */
export function absolute(t, seconds = false) {
  const ms = toMs(t);
  if (ms === null) return '—';
  return `${day(ms)} ${clock(ms, seconds)}`;
}

/** The zone's UTC offset at that time, "UTC+01:00". @param {number} ms */
export function offset(ms) {
  const minutes = -new Date(ms).getTimezoneOffset();
  const sign = minutes < 0 ? '−' : '+';
  const m = Math.abs(minutes);
  return `UTC${sign}${pad(Math.floor(m / 60))}:${pad(m % 60)}`;
}

/** The browser's zone name, e.g. "Europe/Berlin" (or the offset when it has none). */
export function zoneName(ms = Date.now()) {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || offset(ms);
  } catch {
    return offset(ms);
  }
}

/** The hover text: the ISO instant and the local time with its zone. @param {string | number | null | undefined} t */
export function hoverText(t) {
  const ms = toMs(t);
  if (ms === null) return '';
  return `${new Date(ms).toISOString()} · ${absolute(ms, true)} ${zoneName(ms)} (${offset(ms)})`;
}

/**
 * "just now", "42s ago", "3m ago", "5h ago", "2d ago" (future times: "in 3m").
 * @param {string | number | null | undefined} t
 */
export function relative(t, now = Date.now()) {
  const ms = toMs(t);
  if (ms === null) return '—';
  const diff = Math.round((now - ms) / 1000);
  const s = Math.abs(diff);
  if (s < 5) return 'just now';
  const text =
    s < 60 ? `${s}s`
    : s < 3600 ? `${Math.floor(s / 60)}m`
    : s < 86_400 ? `${Math.floor(s / 3600)}h`
    : `${Math.floor(s / 86_400)}d`;
  return diff >= 0 ? `${text} ago` : `in ${text}`;
}

/** A duration in ms: "42s", "3m 05s", "2h 04m". @param {number | null | undefined} ms */
export function duration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return '—';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${pad(s % 60)}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${pad(m % 60)}m`;
}

/**
 * How long a run took or has taken. A queued run has not started work, so it has no duration yet (not a clock
 * ticking from when it was queued). @param {{status?: string, started_at?: string|null, ended_at?: string|null}} run
 */
export function runDuration(run, now = Date.now()) {
  if (run.status === 'queued') return 'queued';
  const start = toMs(run.started_at);
  if (start === null) return '—';
  return duration((toMs(run.ended_at) ?? now) - start);
}

/**
 * Whether a run's duration is still growing (the pages tick those).
 * @param {{status?: string, ended_at?: string|null}} run
 */
export function isTicking(run) {
  return !run.ended_at && run.status !== 'queued';
}

/**
 * A <time> element: relative text by default, absolute with `mode: 'absolute'`; the hover always has the ISO time
 * and zone.
 * @param {string | number | null | undefined} t
 * @param {{mode?: 'relative' | 'absolute', seconds?: boolean}} [opts]
 */
export function timeTag(t, opts = {}) {
  const ms = toMs(t);
  if (ms === null) return html`<span class="muted">—</span>`;
  const text = opts.mode === 'absolute' ? absolute(ms, opts.seconds ?? false) : relative(ms);
  return html`<time datetime="${new Date(ms).toISOString()}" title="${hoverText(ms)}">${text}</time>`;
}
