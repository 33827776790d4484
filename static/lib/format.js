// @ts-check
// Display formatting for the UI. Unknown values are shown as "unknown" or "—", never as a made-up zero.

/** @param {number | null | undefined} usd */
export function money(usd) {
  if (usd === null || usd === undefined || !Number.isFinite(usd)) return 'unknown';
  if (usd > 0 && usd < 0.01) return '<$0.01';
  return `$${usd.toFixed(2)}`;
}

/** @param {number | null | undefined} n */
export function count(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—';
  return new Intl.NumberFormat().format(n);
}

/** @param {number | null | undefined} ratio 0..1 */
export function percent(ratio) {
  if (ratio === null || ratio === undefined || !Number.isFinite(ratio)) return '—';
  return `${Math.round(ratio * 1000) / 10}%`;
}

/** @param {number | null | undefined} ms */
export function duration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return '—';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${String(m % 60).padStart(2, '0')}m`;
}

/** @param {string | number | null | undefined} t */
export function toMs(t) {
  if (t === null || t === undefined || t === '') return null;
  const ms = typeof t === 'number' ? t : Date.parse(t);
  return Number.isFinite(ms) ? ms : null;
}

/** Run duration: end − start, or now − start while it is still going. @param {{started_at?: string|null, ended_at?: string|null}} run */
export function runDuration(run, now = Date.now()) {
  const start = toMs(run.started_at);
  if (start === null) return '—';
  return duration((toMs(run.ended_at) ?? now) - start);
}

/** "3m ago", "2h ago", or a date for older times. @param {string | number | null | undefined} t */
export function ago(t, now = Date.now()) {
  const ms = toMs(t);
  if (ms === null) return '—';
  const s = Math.round((now - ms) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return shortDateTime(ms, now);
}

/** Local date and time, minute precision. @param {string | number | null | undefined} t */
export function dateTime(t) {
  const ms = toMs(t);
  if (ms === null) return '—';
  return new Date(ms).toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

/** Compact local date and time for tables: "Nov 20, 14:05" (year only when not this year). @param {string | number | null | undefined} t */
export function shortDateTime(t, now = Date.now()) {
  const ms = toMs(t);
  if (ms === null) return '—';
  const d = new Date(ms);
  const sameYear = d.getFullYear() === new Date(now).getFullYear();
  const day = d.toLocaleDateString(undefined, sameYear ? { month: 'short', day: 'numeric' } : { year: 'numeric', month: 'short', day: 'numeric' });
  return `${day}, ${d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', hour12: false })}`;
}

/** Local time with seconds, for event logs. @param {string | number | null | undefined} t */
export function clock(t) {
  const ms = toMs(t);
  if (ms === null) return '';
  return new Date(ms).toLocaleTimeString(undefined, { hour12: false });
}

/** @param {number | null | undefined} bytes */
export function bytes(bytes) {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return '—';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Turns snake_case into "Snake case" for labels. @param {string} key */
export function label(key) {
  const text = key.replace(/[_.]+/g, ' ').trim();
  return text.charAt(0).toUpperCase() + text.slice(1);
}
