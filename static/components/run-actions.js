// @ts-check
// <svc-run-actions>: stop, resume, retry, verify, open PR and delete, each confirmed first. Run detail lists the reason
// the server would refuse each action (`refusals`): such buttons are disabled and the reason is shown under them. A
// refusal that still happens (loopback_only, a race) is shown with the server's reason first, then its code.
import { html, render } from '../lib/html.js';
import { api, runPath } from '../lib/api.js';
import { runLink } from '../lib/route.js';
import { reasonFirst } from '../lib/ui.js';
import { confirmAction } from './confirm-dialog.js';
import { TERMINAL } from '../lib/run-status.js';

/**
 * @typedef {{
 *   name: string, label: string, method: string, suffix: string, when: (s: string) => boolean, title: string,
 *   body: string, danger?: boolean, shown?: (run: Record<string, unknown>) => boolean,
 * }} Action
 * @type {Action[]}
 */
const ACTIONS = [
  {
    name: 'stop', label: 'Stop', method: 'POST', suffix: '/stop', when: (s) => !TERMINAL.has(s) && s !== 'stopping',
    title: 'Stop this run?', body: 'The agent is signalled to stop; the worktree is kept so the run can be resumed.',
    danger: true,
  },
  {
    name: 'resume', label: 'Resume', method: 'POST', suffix: '/resume', when: (s) => s === 'stopped' || s === 'failed',
    title: 'Resume this run?', body: 'The same run continues in the same worktree.',
  },
  {
    name: 'retry', label: 'Retry', method: 'POST', suffix: '/retry', when: (s) => TERMINAL.has(s),
    title: 'Retry as a new run?', body: 'A new run starts in the same group; this one is left as it is.',
  },
  {
    name: 'verify', label: 'Verify', method: 'POST', suffix: '/verify', when: (s) => TERMINAL.has(s),
    title: 'Verify again?', body: 'The checks run again and a new Evidence Receipt is issued.',
  },
  {
    // Only on a --pr run (branch svc/…) without a PR whose work was verified: the one case it is for.
    name: 'pr', label: 'Open PR', method: 'POST', suffix: '/pr', when: (s) => s === 'failed',
    shown: (run) => !run.pr_url && String(run.branch ?? '').startsWith('svc/') &&
      (run.verdict === 'verified' || run.verdict === 'verified_with_gaps'),
    title: 'Open the pull request now?',
    body: 'The run\'s verified work is pushed to its pinned origin and the pull request is opened with its receipt.',
  },
  {
    name: 'delete', label: 'Delete', method: 'DELETE', suffix: '', when: (s) => TERMINAL.has(s),
    title: 'Delete this run?',
    body: 'The run, its events and its artifacts are removed from the Control Plane. This cannot be undone.',
    danger: true,
  },
];

class RunActions extends HTMLElement {
  constructor() {
    super();
    /** @type {{source: string, run: string} | null} */
    this.runId = null;
    this.status = '';
    /** @type {Record<string, unknown>} */
    this.run = {};
    this.busy = false;
    /**
     * Per action: null when the server would accept it, else its reason (from run detail).
     * @type {Record<string, string | null> | null}
     */
    this.refusals = null;
  }

  connectedCallback() {
    render(this, html`<div class="actions" role="group" aria-label="Run actions" data-role="buttons"></div>
      <div data-role="message" aria-live="polite"></div>`);
    this.addEventListener('click', (event) => {
      const button = event.target instanceof Element ? event.target.closest('button[data-run-action]') : null;
      const action = ACTIONS.find((a) => a.name === button?.getAttribute('data-run-action'));
      if (action) void this.perform(action);
    });
  }

  /** @param {{status: string}} run @param {any} [body] */
  update(run, body) {
    this.status = run.status;
    this.run = run;
    const r = body?.refusals;
    this.refusals = r && typeof r === 'object' ? r : null;
    this.renderButtons();
  }

  /** Why the server would refuse the action now, or null. @param {Action} a */
  refusal(a) {
    if (this.refusals && a.name in this.refusals) return this.refusals[a.name] ?? null;
    return a.when(this.status) ? null : `Not available while the run is ${this.status}`;
  }

  renderButtons() {
    const box = /** @type {HTMLElement} */ (this.querySelector('[data-role=buttons]'));
    // Reasons beyond the run's status (another source, an unknown repository) are not guessable from the badge:
    // they are spelled out under the buttons. Status reasons stay in each button's tooltip.
    /** @type {Map<string, string[]>} reason → labels of the actions it disables */
    const why = new Map();
    const actions = ACTIONS.filter((a) => !a.shown || a.shown(this.run));
    for (const a of actions) {
      const reason = this.refusal(a);
      if (reason && a.when(this.status)) why.set(reason, [...(why.get(reason) ?? []), a.label]);
    }
    render(box, html`${actions.map((a) => {
      const reason = this.refusal(a);
      return html`<button type="button" data-run-action="${a.name}" class="${a.danger ? 'danger-outline' : ''}"
        ${reason === null && !this.busy ? '' : html`disabled`} title="${reason ?? a.body}">${a.label}</button>`;
    })}
    ${why.size ? html`<ul class="action-reasons muted" data-role="reasons">${[...why].map(([reason, labels]) =>
      html`<li><strong>${labels.join(', ')}:</strong> ${reason}</li>`)}</ul>` : ''}`);
  }

  /** @param {Action} action */
  async perform(action) {
    if (!this.runId) return;
    const danger = action.danger ?? false;
    const ok = await confirmAction({ title: action.title, body: action.body, confirm: action.label, danger });
    if (!ok) return;
    const message = /** @type {HTMLElement} */ (this.querySelector('[data-role=message]'));
    this.busy = true;
    this.renderButtons();
    render(message, html`<p class="muted" role="status">${action.label}: sending…</p>`);
    try {
      const result = await api(`${runPath(this.runId)}${action.suffix}`, { method: action.method, body: {} });
      if (action.name === 'delete') {
        location.hash = '#/runs';
        return;
      }
      const fresh = result?.run && typeof result.run === 'object' ? result.run : result;
      const isNew = fresh && typeof fresh.run === 'string' && fresh.run !== this.runId.run;
      const link = isNew ? html` New run: <a href="${runLink(fresh)}">${fresh.run}</a>` : '';
      render(message, html`<p class="notice ok" role="status">${action.label} accepted.${link}</p>`);
      this.dispatchEvent(new CustomEvent('svc:run-changed', { bubbles: true }));
    } catch (err) {
      render(message, reasonFirst(`${action.label} refused`, err));
    } finally {
      this.busy = false;
      this.renderButtons();
    }
  }
}

export function registerRunActions() {
  if (!customElements.get('svc-run-actions')) customElements.define('svc-run-actions', RunActions);
}
