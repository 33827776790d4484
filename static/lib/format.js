// @ts-check
// Display formatting for numbers and labels (times live in time.js). Unknown values are shown as "unknown" or "—",
// never as a made-up zero.

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
