// @ts-check
// Display formatting for numbers and labels (times live in time.js). Unknown values are shown as "unknown" or "—",
// never as a made-up zero.

/**
 * Dollars as the CLI shows them (twin of formatUsd in src/cli/runs-format.ts, which this no-build file cannot
 * import; test/unit/money-twin.test.ts holds them to one rule): cents for a dollar or more, and below that enough
 * decimals to keep two significant digits, so $0.0123 is not shown as $0.01.
 * @param {number | null | undefined} usd
 */
export function money(usd) {
  if (usd === null || usd === undefined || !Number.isFinite(usd)) return 'unknown';
  const abs = Math.abs(usd);
  const decimals = abs >= 1 || abs === 0 ? 2 : Math.min(10, Math.ceil(-Math.log10(abs)) + 2);
  const text = abs.toFixed(decimals).replace(/(\.\d\d\d*?)0+$/, '$1');
  return `${usd < 0 ? '-' : ''}$${text}`;
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
