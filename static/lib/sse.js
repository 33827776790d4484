// @ts-check
// Live event streams over fetch (EventSource cannot send an Authorization header). Tracks the last event id and
// reconnects with Last-Event-ID and ?after=, dropping any id it has already delivered: no gaps, no duplicates.
import { authHeaders, requestToken, getToken } from './api.js';
import { createSseParser } from '../client/sse-parse.js';
import { markFresh, markUnreachable } from './connection.js';

/**
 * @typedef {{ id: number, kind: string, data: any }} StreamEvent
 * @typedef {'connecting' | 'live' | 'reconnecting' | 'closed'} StreamState
 * @typedef {{ after?: number, onEvent: (e: StreamEvent) => void, onState?: (s: StreamState) => void }} StreamOptions
 */

/**
 * Opens a stream; call the returned function to close it for good.
 * @param {string} path e.g. /v1/stream
 * @param {StreamOptions} options
 */
export function openStream(path, options) {
  let lastId = options.after ?? 0;
  let closed = false;
  let failures = 0;
  /** @type {AbortController | null} */
  let controller = null;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;

  /** @param {StreamState} s */
  function state(s) {
    if (!closed || s === 'closed') options.onState?.(s);
  }

  function url() {
    if (lastId <= 0) return path;
    return `${path}${path.includes('?') ? '&' : '?'}after=${lastId}`;
  }

  async function connect() {
    controller = new AbortController();
    const parser = createSseParser();
    state(failures === 0 ? 'connecting' : 'reconnecting');
    try {
      const hadToken = getToken() !== '';
      const headers = authHeaders({ accept: 'text/event-stream' });
      if (lastId > 0) headers['last-event-id'] = String(lastId);
      const response = await fetch(url(), { headers, cache: 'no-store', signal: controller.signal });
      if (response.status === 401) {
        if (await requestToken(hadToken)) return schedule(0);
        // The person declined the prompt: stay quiet until a token is entered elsewhere on the page.
        state('closed');
        window.addEventListener('svc:token', () => schedule(0), { once: true });
        return;
      }
      if (!response.ok || !response.body) throw new Error(`stream answered ${response.status}`);
      state('live');
      failures = 0;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const message of parser.push(value)) deliver(message);
      }
    } catch (err) {
      if (closed) return;
      if (!(err instanceof DOMException && err.name === 'AbortError')) {
        failures++;
        markUnreachable();
      }
    }
    if (closed) return;
    failures = Math.max(failures, 1);
    state('reconnecting');
    schedule(Math.min(parser.retryMs() ?? 1000, 5000) * Math.min(failures, 8));
  }

  /** @param {import('../client/sse-parse.js').SseMessage} message */
  function deliver(message) {
    const id = Number(message.id);
    if (!Number.isFinite(id) || id <= lastId) return;
    lastId = id;
    markFresh();
    let data;
    try {
      data = JSON.parse(message.data);
    } catch {
      data = message.data;
    }
    options.onEvent({ id, kind: message.event, data });
  }

  /** @param {number} ms */
  function schedule(ms) {
    clearTimeout(timer);
    timer = setTimeout(() => void connect(), ms);
  }

  function stop() {
    closed = true;
    clearTimeout(timer);
    controller?.abort();
    state('closed');
  }

  void connect();
  return Object.assign(stop, {
    /** The id of the last event delivered. */
    lastId: () => lastId,
    /** Drops the connection as a network failure would (used by tests and by "reconnect now"). */
    reconnect: () => controller?.abort(),
  });
}
