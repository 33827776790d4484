// @ts-check
// <svc-run-detail>: one run — header, question and answer, actions, live event log, artifacts, receipt, review risk.
// The run's own stream drives everything: each event re-reads the run (debounced) so header and actions stay true.
import { html, render } from '../lib/html.js';
import { api, runPath } from '../lib/api.js';
import { hashLink } from '../lib/route.js';
import { statusBadge, verdictBadge, loading, failure } from '../lib/ui.js';
import { money, count, dateTime, runDuration } from '../lib/format.js';
import { registerEventLog } from './event-log.js';
import { registerRunActions } from './run-actions.js';
import { registerAnswerForm } from './answer-form.js';
import { registerArtifactList } from './artifact-list.js';
import { registerRiskReport } from './risk-report.js';
import { registerReceiptView } from './receipt-view.js';

/** @typedef {import('../lib/run-row.js').Run & {branch?: string|null, pr_url?: string|null, tokens_in?: number|null, tokens_out?: number|null, exit_code?: number|null, error?: string|null, updated_at?: string|null}} RunDetail */

class RunDetailPage extends HTMLElement {
  constructor() {
    super();
    /** @type {import('../lib/route.js').Route | undefined} */
    this.route = undefined;
    /** @type {RunDetail | null} */
    this.run = null;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.refreshTimer = undefined;
    /** @type {ReturnType<typeof setInterval> | undefined} */
    this.ticker = undefined;
  }

  get runId() {
    const [, source = '', run = ''] = this.route?.segments ?? [];
    return { source, run };
  }

  connectedCallback() {
    render(this, html`<p class="crumbs"><a href="#/runs">← Runs</a></p><div data-role="head">${loading('Loading run')}</div>`);
    this.addEventListener('click', (event) => {
      if (event.target instanceof Element && event.target.closest('[data-action=retry]')) void this.load();
    });
    this.addEventListener('svc:run-changed', () => this.scheduleRefresh());
    this.ticker = setInterval(() => {
      const cell = this.querySelector('[data-role=duration]');
      if (cell && this.run && !this.run.ended_at) cell.textContent = runDuration(this.run);
    }, 1000);
    void this.load();
  }

  disconnectedCallback() {
    clearTimeout(this.refreshTimer);
    clearInterval(this.ticker);
  }

  scheduleRefresh() {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => void this.load(true), 200);
  }

  async load(quiet = false) {
    const head = /** @type {HTMLElement} */ (this.querySelector('[data-role=head]'));
    try {
      const body = await api(runPath(this.runId));
      const run = /** @type {RunDetail} */ (body?.run && typeof body.run === 'object' ? body.run : body);
      const first = this.run === null;
      this.run = run;
      if (first) this.renderSkeleton();
      this.renderHeader();
      for (const el of this.querySelectorAll('svc-answer-form, svc-run-actions, svc-artifact-list, svc-risk-report, svc-receipt-view')) {
        /** @type {any} */ (el).update?.(run, body);
      }
    } catch (err) {
      if (!quiet || this.run === null) render(head, failure(err));
    }
  }

  /** The parts below the header are created once so the event log keeps its stream. */
  renderSkeleton() {
    const parts = html`<div data-role="head"></div>
      <svc-answer-form></svc-answer-form>
      <svc-run-actions></svc-run-actions>
      <div class="detail-grid">
        <section class="panel log-panel" aria-labelledby="log-title"><h2 id="log-title">Events</h2><svc-event-log></svc-event-log></section>
        <div class="side">
          <section class="panel" aria-labelledby="risk-title"><h2 id="risk-title">Review risk</h2><svc-risk-report></svc-risk-report></section>
          <section class="panel" aria-labelledby="artifacts-title"><h2 id="artifacts-title">Artifacts</h2><svc-artifact-list></svc-artifact-list></section>
        </div>
      </div>
      <section class="panel" aria-labelledby="receipt-title" data-role="receipt-panel"><h2 id="receipt-title">Evidence Receipt</h2><svc-receipt-view></svc-receipt-view></section>`;
    render(this, html`<p class="crumbs"><a href="#/runs">← Runs</a></p>${parts}`);
    for (const el of this.querySelectorAll('svc-answer-form, svc-run-actions, svc-event-log, svc-artifact-list, svc-risk-report, svc-receipt-view')) {
      /** @type {any} */ (el).runId = this.runId;
    }
  }

  renderHeader() {
    const run = this.run;
    if (!run) return;
    const head = /** @type {HTMLElement} */ (this.querySelector('[data-role=head]'));
    render(head, html`<header class="run-head${run.status === 'blocked' ? ' is-blocked' : ''}">
      <div class="run-title">
        <h1>${run.brief || run.run}</h1>
        <div class="badges">${statusBadge(run.status)} ${verdictBadge(run.verdict)}</div>
      </div>
      <dl class="facts">
        <div><dt>Run</dt><dd class="mono">${run.source}/${run.run}</dd></div>
        <div><dt>Repo</dt><dd class="mono">${run.repo ?? '—'}</dd></div>
        <div><dt>Branch</dt><dd class="mono">${run.branch ?? '—'}</dd></div>
        <div><dt>Pull request</dt><dd>${run.pr_url ? html`<a href="${run.pr_url}" rel="noopener noreferrer" target="_blank">${run.pr_url.replace(/^https?:\/\//, '')}</a>` : '—'}</dd></div>
        <div><dt>Origin</dt><dd>${run.origin ?? '—'}</dd></div>
        <div><dt>Provider</dt><dd>${run.provider ?? '—'}</dd></div>
        <div><dt>Started</dt><dd>${dateTime(run.started_at)}</dd></div>
        <div><dt>Duration</dt><dd data-role="duration">${runDuration(run)}</dd></div>
        <div><dt>Cost</dt><dd class="${run.cost_usd == null ? 'unknown' : ''}">${money(run.cost_usd)}</dd></div>
        <div><dt>Tokens in / out</dt><dd>${count(run.tokens_in)} / ${count(run.tokens_out)}</dd></div>
        <div><dt>Group</dt><dd>${run.group_id ? html`<a class="mono" href="${hashLink(['runs'], { group: run.group_id })}">${run.group_id === run.run ? 'first of its group' : run.group_id}</a>` : '—'}</dd></div>
        ${run.exit_code != null ? html`<div><dt>Exit code</dt><dd>${run.exit_code}</dd></div>` : ''}
      </dl>
      ${run.error ? html`<p class="run-error" role="alert"><strong>Error:</strong> ${run.error}</p>` : ''}
    </header>`);
  }
}

export function registerRunDetail() {
  registerEventLog();
  registerRunActions();
  registerAnswerForm();
  registerArtifactList();
  registerRiskReport();
  registerReceiptView();
  if (!customElements.get('svc-run-detail')) customElements.define('svc-run-detail', RunDetailPage);
}
