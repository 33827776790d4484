// @ts-check
// <svc-risk-report>: GET /v1/review/risk for the run — score, level, the reasons and the files behind it.
import { html, render } from '../lib/html.js';
import { api, query } from '../lib/api.js';
import { inlineFailure } from '../lib/ui.js';
import { artifactsOf } from './artifact-list.js';

const NO_DIFF = 'No diff recorded for this run yet, so there is nothing to score.';

/** One reason as text, whichever shape the server gave it. @param {any} x */
function reasonText(x) {
  return typeof x === 'string' ? x : x.text ?? x.reason ?? JSON.stringify(x);
}

/** One changed file: its path, the lines added and removed, and its flags. @param {any} f */
function fileLine(f) {
  if (typeof f === 'string') return f;
  /** @type {string[]} */
  const names = Array.isArray(f.flags) ? f.flags : [];
  const flags = names.map((flag) => html` <span class="badge flag-${flag.replace(/[^a-z]/g, '')}">${flag}</span>`);
  return html`${f.path ?? ''} <span class="muted">+${f.insertions ?? 0} −${f.deletions ?? 0}</span>${flags}`;
}

class RiskReport extends HTMLElement {
  constructor() {
    super();
    /** @type {{source: string, run: string} | null} */
    this.runId = null;
    this.loadedFor = '';
  }

  connectedCallback() {
    render(this, html`<p class="muted">Loading…</p>`);
  }

  /** @param {{status: string, verdict?: string | null, updated_at?: string | null}} run @param {any} body */
  update(run, body) {
    // Ask for a score only once the run lists its diffstat: asking earlier is a 404 in the console.
    const hasDiff = artifactsOf(body).some((a) => /(^|\/)diffstat\.json$/.test(a.path));
    const key = `${run.status}:${run.verdict ?? ''}:${hasDiff}`;
    if (!this.runId || key === this.loadedFor) return;
    this.loadedFor = key;
    if (hasDiff) void this.load();
    else render(this, html`<p class="muted">${NO_DIFF}</p>`);
  }

  async load() {
    const id = /** @type {{source: string, run: string}} */ (this.runId);
    try {
      const r = await api(`/v1/review/risk${query({ source: id.source, run: id.run })}`);
      if (r?.score === undefined || r?.score === null) return render(this, html`<p class="muted">${NO_DIFF}</p>`);
      const score = Number(r?.score);
      const level = String(r?.level ?? 'unknown');
      /** @type {any[]} */
      const reasons = Array.isArray(r?.reasons) ? r.reasons : [];
      /** @type {any[]} */
      const files = Array.isArray(r?.files) ? r.files : [];
      render(this, html`<div class="risk risk-${level.replace(/[^a-z]/g, '')}">
        <p class="risk-score">
          <span class="risk-number">${Number.isFinite(score) ? score : '—'}</span><span class="muted">/100</span>
          <span class="badge risk-badge">${level} risk</span></p>
        <meter min="0" max="100" low="34" high="67" optimum="0" value="${Number.isFinite(score) ? score : 0}"
          aria-label="Risk score">${score}</meter>
        ${reasons.length
          ? html`<ul class="reasons">${reasons.map((x) => html`<li>${reasonText(x)}</li>`)}</ul>`
          : html`<p class="muted">No risk factors found.</p>`}
        ${files.length ? html`<details><summary>${files.length} file${files.length === 1 ? '' : 's'}</summary>
          <ul class="mono files">${files.map((f) => html`<li>${fileLine(f)}</li>`)}</ul></details>` : ''}
      </div>`);
    } catch (err) {
      const code = /** @type {{code?: string}} */ (err).code;
      if (code === 'not_found') render(this, html`<p class="muted">${NO_DIFF}</p>`);
      else render(this, inlineFailure(err));
    }
  }
}

export function registerRiskReport() {
  if (!customElements.get('svc-risk-report')) customElements.define('svc-risk-report', RiskReport);
}
