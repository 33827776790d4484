// @ts-check
// <svc-run-detail>: one run — header with its attempts, question and answer, actions, timeline, live event log,
// changes (the diff), artifacts, receipt, review risk.
// The run's own stream drives everything: each event re-reads the run (debounced) so header and actions stay true.
import { html, render } from '../lib/html.js';
import { api, runPath } from '../lib/api.js';
import { hashLink, runLink } from '../lib/route.js';
import { statusBadge, verdictBadge, loading, failure } from '../lib/ui.js';
import { failureText } from '../lib/run-status.js';
import { money, count } from '../lib/format.js';
import { timeTag, runDuration, isTicking } from '../lib/time.js';
import { prLabel } from '../lib/run-row.js';
import { registerEventLog } from './event-log.js';
import { registerRunActions } from './run-actions.js';
import { registerAnswerForm } from './answer-form.js';
import { registerArtifactList } from './artifact-list.js';
import { registerRiskReport } from './risk-report.js';
import { registerReceiptView } from './receipt-view.js';
import { registerDiffView } from './diff-view.js';
import { registerRunTimeline } from './run-timeline.js';

/** @typedef {{source: string, run: string, status: string, started_at?: string|null}} Attempt */
/**
 * @typedef {import('../lib/run-row.js').Run & {
 *   tokens_in?: number|null, tokens_out?: number|null, exit_code?: number|null, error?: string|null,
 *   updated_at?: string|null, attempts?: Attempt[],
 *   pending_answer?: {answer: string, answered_at: string, via: string, delivered_at: string|null} | null,
 *   reported?: {cost_usd: number|null} | null, metered?: {cost_usd: number|null} | null,
 * }} RunDetail
 */

/**
 * Why the run did not succeed: its class (infra is the one worth retrying as it is) and the reason.
 * @param {unknown} failure
 */
function failureLine(failure) {
  const text = failureText(failure);
  if (!text) return '';
  const retryable = /** @type {{retryable?: unknown}} */ (failure).retryable === true;
  return html`<p class="run-failure" data-role="failure"><strong>Failed for</strong> ${text}${retryable
    ? html` <span class="muted">(svc's side: worth a retry)</span>` : ''}</p>`;
}

const PARTS = [
  'svc-answer-form', 'svc-run-actions', 'svc-run-timeline', 'svc-artifact-list', 'svc-risk-report', 'svc-receipt-view',
  'svc-diff-view',
].join(', ');

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
    render(this, html`<p class="crumbs"><a href="#/runs">← Runs</a></p>
      <div data-role="head">${loading('Loading run')}</div>`);
    this.addEventListener('click', (event) => {
      if (event.target instanceof Element && event.target.closest('[data-action=retry]')) void this.load();
    });
    this.addEventListener('svc:run-changed', () => this.scheduleRefresh());
    this.ticker = setInterval(() => {
      const cell = this.querySelector('[data-role=duration]');
      if (cell && this.run && isTicking(this.run)) cell.textContent = runDuration(this.run);
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
      for (const el of this.querySelectorAll(PARTS)) {
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
      <section class="panel" aria-labelledby="timeline-title"><h2 id="timeline-title">Timeline</h2>
        <svc-run-timeline></svc-run-timeline></section>
      <div class="detail-grid">
        <section class="panel log-panel" aria-labelledby="log-title"><h2 id="log-title">Events</h2>
          <svc-event-log></svc-event-log></section>
        <div class="side">
          <section class="panel" aria-labelledby="risk-title"><h2 id="risk-title">Review risk</h2>
            <svc-risk-report></svc-risk-report></section>
          <section class="panel" aria-labelledby="artifacts-title"><h2 id="artifacts-title">Artifacts</h2>
            <svc-artifact-list></svc-artifact-list></section>
        </div>
      </div>
      <section class="panel" aria-labelledby="changes-title"><h2 id="changes-title">Changes</h2>
        <svc-diff-view></svc-diff-view></section>
      <section class="panel" aria-labelledby="receipt-title" data-role="receipt-panel">
        <h2 id="receipt-title">Evidence Receipt</h2>
        <svc-receipt-view></svc-receipt-view></section>`;
    render(this, html`<p class="crumbs"><a href="#/runs">← Runs</a></p>${parts}`);
    for (const el of this.querySelectorAll(`${PARTS}, svc-event-log`)) {
      /** @type {any} */ (el).runId = this.runId;
    }
  }

  renderHeader() {
    const run = this.run;
    if (!run) return;
    const head = /** @type {HTMLElement} */ (this.querySelector('[data-role=head]'));
    const pending = run.pending_answer
      ? html` <span class="badge answer-pending"
        title="An answer was sent; the run has not picked it up yet">answer pending</span>`
      : '';
    const exact = /** @type {const} */ ({ mode: 'absolute', seconds: true });
    render(head, html`<header class="run-head${run.status === 'blocked' ? ' is-blocked' : ''}">
      <div class="run-title">
        <h1>${run.brief || run.run}</h1>
        <div class="badges">${statusBadge(run.status)}${pending} ${verdictBadge(run.verdict)}</div>
      </div>
      ${this.attemptLine()}
      <dl class="facts">
        <div><dt>Run</dt><dd class="mono">${run.run}</dd></div>
        <div><dt>Source</dt>
          <dd class="mono"><a href="${hashLink(['runs'], { source: run.source })}">${run.source}</a></dd></div>
        <div><dt>Repo</dt><dd class="mono">${run.repo ?? '—'}</dd></div>
        <div><dt>Branch</dt><dd class="mono">${run.branch ?? '—'}</dd></div>
        <div><dt>Pull request</dt><dd>${run.pr_url
          ? html`<a href="${run.pr_url}" rel="noopener noreferrer" target="_blank">${prLabel(run.pr_url)}</a>`
          : '—'}</dd></div>
        <div><dt>Origin</dt><dd>${run.origin ?? '—'}</dd></div>
        <div><dt>Provider</dt><dd>${run.provider ?? '—'}</dd></div>
        <div><dt>${run.status === 'queued' ? 'Queued' : 'Started'}</dt><dd>${timeTag(run.started_at, exact)}</dd></div>
        <div><dt>Ended</dt><dd>${run.ended_at ? timeTag(run.ended_at, exact) : '—'}</dd></div>
        <div><dt>Duration</dt><dd data-role="duration">${runDuration(run)}</dd></div>
        <div><dt>${run.metered?.cost_usd != null ? 'Cost (metered)' : 'Cost'}</dt>
          <dd class="${run.cost_usd == null ? 'unknown' : ''}">${money(run.cost_usd)}</dd></div>
        ${reportedDiffers(run)
          ? html`<div data-role="reported-cost"><dt>Reported by the agent</dt>
              <dd>${money(run.reported?.cost_usd ?? null)}</dd></div>`
          : ''}
        <div><dt>Tokens in / out</dt><dd>${count(run.tokens_in)} / ${count(run.tokens_out)}</dd></div>
        ${run.exit_code != null ? html`<div><dt>Exit code</dt><dd>${run.exit_code}</dd></div>` : ''}
        ${typeof run.trace_id === 'string' && /^[0-9a-f]{32}$/.test(run.trace_id)
          ? html`<div><dt>Trace</dt><dd class="mono" data-role="trace-id">${run.trace_id}</dd></div>` : ''}
      </dl>
      ${run.error ? html`<p class="run-error" role="alert"><strong>Error:</strong> ${run.error}</p>` : ''}
      ${failureLine(run.failure)}
    </header>`);
  }

  /** "Attempt 2 of 3 · retry of … · retried by … · all attempts", when the run's group has more than one run. */
  attemptLine() {
    const run = /** @type {RunDetail} */ (this.run);
    const attempts = Array.isArray(run.attempts) ? run.attempts : [];
    const i = attempts.findIndex((a) => a.source === run.source && a.run === run.run);
    if (attempts.length < 2 || i === -1) return '';
    const before = attempts[i - 1];
    const after = attempts[i + 1];
    return html`<p class="attempt-line" data-role="attempts"><strong>Attempt ${i + 1} of ${attempts.length}</strong>
      ${before ? html` · retry of <a href="${runLink(before)}" data-role="retry-of">attempt ${i}
        <span class="mono">${before.run}</span></a>` : ''}
      ${after ? html` · retried by <a href="${runLink(after)}" data-role="retried-by">attempt ${i + 2}
        <span class="mono">${after.run}</span></a>` : ''}
      · <a href="${hashLink(['runs'], { source: run.source, group: run.group_id ?? '' })}">all attempts</a></p>`;
  }
}

export function registerRunDetail() {
  registerEventLog();
  registerRunActions();
  registerAnswerForm();
  registerArtifactList();
  registerRiskReport();
  registerReceiptView();
  registerDiffView();
  registerRunTimeline();
  if (!customElements.get('svc-run-detail')) customElements.define('svc-run-detail', RunDetailPage);
}

/**
 * Whether the agent's own figure is worth showing beside the metered one: the gate metered the run and the agent
 * reported another amount, or none at all (the gate's meter is what the run cost; a differing report is news).
 * @param {RunDetail} run
 */
function reportedDiffers(run) {
  if (run.metered?.cost_usd == null) return false;
  const said = run.reported?.cost_usd ?? null;
  return said === null || Math.abs(said - run.metered.cost_usd) >= 0.005;
}
