// @ts-check
// The one connection state of the page. API calls, the page's live stream and the /ready probe report here; the
// topbar, the footer and the stale-data banner all render from it, so they can never contradict each other.

/** @typedef {import('./sse.js').StreamState} StreamState */
/** @typedef {{reachable: boolean, stream: StreamState | null, lastFresh: number | null}} Connection */

/** @type {Connection} */
const state = { reachable: true, stream: null, lastFresh: null };
/** @type {Set<(c: Connection) => void>} */
const listeners = new Set();

function emit() {
  const snapshot = { ...state };
  for (const fn of listeners) fn(snapshot);
}

/** Data just arrived from the server (an API answer or a stream event). */
export function markFresh() {
  state.reachable = true;
  state.lastFresh = Date.now();
  emit();
}

/** The server answered something (e.g. /ready), but no data came with it. */
export function markReachable() {
  if (state.reachable) return;
  state.reachable = true;
  emit();
}

/** A request or the stream could not reach the server. */
export function markUnreachable() {
  if (!state.reachable) return;
  state.reachable = false;
  emit();
}

/** The page's live stream changed state; null when the page has no stream. @param {StreamState | null} s */
export function noteStream(s) {
  state.stream = s === 'closed' ? null : s;
  if (s === 'live') markFresh();
  else emit();
}

/** @param {(c: Connection) => void} fn */
export function onConnection(fn) {
  listeners.add(fn);
  fn({ ...state });
  return () => listeners.delete(fn);
}

/** Whether what the page shows may be out of date. @param {Connection} c */
export function isStale(c) {
  return !c.reachable || c.stream === 'reconnecting';
}

/**
 * The topbar's word for the state: one word for a reachable server on every page, "Connected", whether or not
 * the page has a live stream ("Live" on some pages and "Connected" on others read as two states).
 * connectionTitle says whether this page updates live.
 * @param {Connection} c
 */
export function connectionLabel(c) {
  if (isStale(c)) return c.stream ? 'Offline · reconnecting…' : 'Offline';
  if (c.stream === 'connecting') return 'Connecting…';
  return 'Connected';
}

/** The badge's hover text. @param {Connection} c @param {string} host */
export function connectionTitle(c, host) {
  if (isStale(c)) return `${host} cannot be reached`;
  return c.stream === 'live' ? `Connected to ${host}: this page updates live` : `Connected to ${host}`;
}
