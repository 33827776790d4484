// @ts-check
// Small shared pieces of markup: status and verdict badges, and the loading, empty and error states every page shows.
import { html } from './html.js';

const STATUS_TEXT = /** @type {Record<string, string>} */ ({ blocked: 'needs answer' });

/** @param {string | null | undefined} status */
export function statusBadge(status) {
  const s = status ?? 'unknown';
  return html`<span class="badge status-${s.replace(/[^a-z_]/g, '')}">${STATUS_TEXT[s] ?? s}</span>`;
}

/** @param {string | null | undefined} verdict */
export function verdictBadge(verdict) {
  if (!verdict) return html`<span class="badge verdict-none" title="No receipt yet">no verdict</span>`;
  return html`<span class="badge verdict-${verdict.replace(/[^a-z_]/g, '')}">${verdict.replace(/_/g, ' ')}</span>`;
}

/** @param {string} [what] */
export function loading(what = 'Loading') {
  return html`<p class="state state-loading" role="status"><span class="spinner"
    aria-hidden="true"></span>${what}…</p>`;
}

/** @param {string} message @param {import('./html.js').SafeHtml | null} [extra] */
export function empty(message, extra = null) {
  return html`<div class="state state-empty"><p>${message}</p>${extra}</div>`;
}

/**
 * The server's own message says what went wrong (e.g. "belongs to another source"), so it comes first; a generic
 * explanation of the code follows only where it adds something the message does not say (what loopback_only means).
 * @param {unknown} err @returns {{reason: string, hint: string, code: string}}
 */
export function describeError(err) {
  const e = /** @type {{code?: string, message?: string}} */ (err ?? {});
  const code = e.code ?? '';
  const message = typeof e.message === 'string' ? e.message.trim() : '';
  const generic = explain(code);
  return { reason: message || generic, hint: message && HINTS.has(code) ? generic : '', code };
}

/** Error state with the server's reason, its code and a retry button (data-action="retry"). @param {unknown} err */
export function failure(err, retry = true) {
  const { reason, hint, code } = describeError(err);
  return html`<div class="state state-error" role="alert">
    <p><strong>${reason}</strong></p>
    ${hint || code ? html`<p class="muted">${hint}${code ? html` <code>${code}</code>` : ''}</p>` : ''}
    ${retry ? html`<button type="button" data-action="retry">Try again</button>` : ''}
  </div>`;
}

/** A one-line error for small side panels. @param {unknown} err */
export function inlineFailure(err) {
  const { reason, code } = describeError(err);
  return html`<p class="inline-error" role="alert">${reason} ${code ? html`<code>${code}</code>` : ''}</p>`;
}

/** "Retry refused: <the server's reason>", for action results. @param {string} title @param {unknown} err */
export function reasonFirst(title, err) {
  const { reason, hint, code } = describeError(err);
  const hintPart = hint ? html` <span class="muted">${hint}</span>` : '';
  const reasonPart = html`<span data-role="reason">${reason}</span>`;
  const codePart = code ? html`<code>${code}</code>` : '';
  return html`<div class="notice error" role="alert"
    data-error-code="${code}"><strong>${title}:</strong> ${reasonPart}${hintPart} ${codePart}</div>`;
}

/**
 * "Not saved. <what the code means> <the server's message> <code>", for a form the server refused.
 * @param {string} title @param {unknown} err
 */
export function refusedNotice(title, err) {
  const e = /** @type {{code?: string, message?: string}} */ (err ?? {});
  return html`<div class="notice error" role="alert"><strong>${title}</strong> ${explain(e.code)}
    <span class="muted">${e.message ?? ''}</span> <code>${e.code ?? ''}</code></div>`;
}

const EXPLANATIONS = /** @type {Record<string, string>} */ ({
  loopback_only:
    'Refused: this action only works on a Control Plane bound to this machine (127.0.0.1), from this machine.',
  proxied_request: 'Refused: this action only works from this machine, not through a proxy.',
  invalid_transition: 'Refused: the server does not allow this for this run now.',
  unauthorized: 'The Control Plane did not accept the token.',
  forbidden_origin: 'Refused: the request did not come from the Control Plane’s own address.',
  not_found: 'Not found.',
  conflict: 'Conflict: someone else changed this first.',
  network_error: 'The Control Plane cannot be reached.',
  unavailable: 'This part of the Control Plane is not available yet.',
  not_configured: 'Not configured on this server.',
  invalid_param: 'The server rejected a value.',
  bad_request: 'The server rejected the request.',
  too_many_requests: 'Too many requests: wait a moment and try again.',
});

// Codes whose explanation adds to the server's message (what the rule is), shown after it.
const HINTS = new Set([
  'loopback_only', 'proxied_request', 'forbidden_origin', 'unauthorized', 'network_error', 'too_many_requests',
]);

/** A one-line human explanation of an error code. @param {string | undefined} code */
export function explain(code) {
  return (code && EXPLANATIONS[code]) || 'Something went wrong.';
}
