// @ts-check
// <svc-runs-page>: the runs table with URL-kept filters, cursor paging and live updates from /v1/stream.
// The first page refreshes itself as events arrive; older pages update the rows they show, in place.
import { html, render } from '../lib/html.js';
import { api, query, itemsOf, runPath } from '../lib/api.js';
import { openStream } from '../lib/sse.js';
import { showStreamState } from '../lib/live.js';
import { hashLink, runLink } from '../lib/route.js';
import { runRow, runKey, runHead } from '../lib/run-row.js';
import { filtersForm, readFilters, apiFilters, FILTER_KEYS, COMPACT_QUERY } from '../lib/runs-filters.js';
import { createAttemptLookup, latestOnly } from '../lib/attempts.js';
import { loading, empty, failure } from '../lib/ui.js';
import { runDuration } from '../lib/time.js';

const PAGE_SIZE = 50;

class RunsPage extends HTMLElement {
  constructor() {
    super();
    /** @type {import('../lib/route.js').Route | undefined} */
    this.route = undefined;
    /** @type {import('../lib/run-row.js').Run[]} */
    this.runs = [];
    /** @type {string | null} */
    this.nextCursor = null;
    /** @type {string[]} */
    this.repos = [];
    /** @type {(() => void) | null} */
    this.closeStream = null;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.refreshTimer = undefined;
    /** @type {ReturnType<typeof setInterval> | undefined} */
    this.ticker = undefined;
    /** @type {ReturnType<typeof setInterval> | undefined} */
    this.poll = undefined;
    this.loadSeq = 0;
    /** Sources seen in any list answer: the source filter's suggestions. @type {Set<string>} */
    this.sources = new Set();
    this.attempts = createAttemptLookup();
    /** @type {Map<string, import('../lib/run-row.js').AttemptInfo>} */
    this.attemptInfo = new Map();
  }

  get query() {
    return this.route?.query ?? new URLSearchParams();
  }

  connectedCallback() {
    render(this, html`<div class="page-head"><h1>Runs</h1><p class="muted" data-role="summary"></p></div>
      <div data-role="filters"></div><div data-role="banner"></div>
      <div data-role="body">${loading('Loading runs')}</div>`);
    this.addEventListener('submit', (event) => this.onSubmit(event));
    this.addEventListener('reset', (event) => {
      event.preventDefault();
      location.hash = hashLink(['runs']);
    });
    this.addEventListener('click', (event) => {
      if (event.target instanceof Element && event.target.closest('[data-action=retry]')) void this.load();
    });
    this.renderFilters();
    void this.loadRepos();
    void this.load();
    this.closeStream = openStream('/v1/stream', {
      onEvent: (e) => this.onEvent(e),
      onState: (s) => showStreamState(s),
    });
    this.ticker = setInterval(() => this.tick(), 1000);
    // A run stored without any event sends nothing on the stream: a slow poll of the newest page covers that.
    this.poll = setInterval(() => {
      if (!document.hidden && !this.query.has('cursor')) void this.load(true);
    }, 30_000);
  }

  disconnectedCallback() {
    this.closeStream?.();
    clearTimeout(this.refreshTimer);
    clearInterval(this.ticker);
    clearInterval(this.poll);
    showStreamState('closed');
  }

  /** Follows a filter or cursor change without reopening the stream. @param {import('../lib/route.js').Route} route */
  routeChanged(route) {
    if (route.segments.length !== 1) return false;
    this.route = route;
    this.renderFilters();
    void this.load();
    return true;
  }

  renderFilters() {
    const box = /** @type {HTMLElement} */ (this.querySelector('[data-role=filters]'));
    // Folded on a phone so the runs come first; kept as the person left it while they filter.
    const previous = /** @type {HTMLDetailsElement | null} */ (box.querySelector('details'));
    const open = previous ? previous.open : !window.matchMedia(COMPACT_QUERY).matches;
    render(box, filtersForm(this.query, this.repos, [...this.sources].sort(), open));
  }

  async loadRepos() {
    try {
      this.repos = itemsOf(await api('/v1/repos'), 'repos')
        .map((r) => (typeof r === 'string' ? r : String(r.name ?? r.repo ?? '')));
      const list = this.querySelector('#f-repos');
      if (list) render(list, html`${this.repos.map((r) => html`<option value="${r}"></option>`)}`);
    } catch {
      // Repos are a convenience (and loopback-only): the filter still works as free text.
    }
  }

  /** @param {Event} event */
  onSubmit(event) {
    const form = /** @type {HTMLFormElement} */ (event.target);
    if (form.dataset.role !== 'filters') return;
    event.preventDefault();
    location.hash = hashLink(['runs'], readFilters(form));
  }

  async load(quiet = false) {
    const seq = ++this.loadSeq;
    const body = /** @type {HTMLElement} */ (this.querySelector('[data-role=body]'));
    if (!quiet) render(body, loading('Loading runs'));
    try {
      const result = await api(`/v1/runs${query({ ...apiFilters(this.query), limit: PAGE_SIZE })}`);
      if (seq !== this.loadSeq) return;
      const previous = new Map(this.runs.map((r) => [runKey(r), JSON.stringify(r)]));
      const runs = itemsOf(result);
      const attempts = await this.attempts.lookup(runs);
      if (seq !== this.loadSeq) return;
      this.runs = runs;
      this.attemptInfo = attempts;
      this.nextCursor = result?.next_cursor ?? null;
      this.noteSources();
      this.renderTable(quiet ? previous : null);
    } catch (err) {
      if (seq === this.loadSeq) render(body, failure(err));
    }
  }

  noteSources() {
    const before = this.sources.size;
    for (const r of this.runs) this.sources.add(r.source);
    const list = this.querySelector('#f-sources');
    if (list && this.sources.size !== before) {
      render(list, html`${[...this.sources].sort().map((s) => html`<option value="${s}"></option>`)}`);
    }
  }

  /** @param {Map<string, string> | null} previous rows before a live refresh: changed ones flash */
  renderTable(previous) {
    const body = /** @type {HTMLElement} */ (this.querySelector('[data-role=body]'));
    const filtered = FILTER_KEYS.some((k) => this.query.get(k));
    const paged = this.query.has('cursor');
    const count = `${this.runs.length}${this.nextCursor ? '+' : ''} run${this.runs.length === 1 ? '' : 's'}`;
    /** @type {HTMLElement} */ (this.querySelector('[data-role=summary]')).textContent = this.runs.length
      ? `${count}${filtered ? ' matching the filters' : ''}${paged ? ' (older page)' : ''}`
      : '';
    this.renderBanner();
    if (this.runs.length === 0) {
      render(body, paged
        ? empty('No older runs.',
          html`<a href="${hashLink(['runs'], this.filterParams())}">Back to the newest runs</a>`)
        : filtered
          ? empty('No runs match these filters.', html`<a href="#/runs">Show all runs</a>`)
          : empty('No runs yet.', html`<p class="muted">Start one from the <a href="#/start">Start</a> page, with
            <code>svc start</code>, or point a shipper at this Control Plane. New runs appear here live.</p>`));
      return;
    }
    // Live refreshes replace the table: keep keyboard focus on the same link.
    const active = document.activeElement;
    const focused = active instanceof HTMLAnchorElement && this.contains(active) ? active.getAttribute('href') : null;
    this.renderRows(body, previous);
    if (focused) /** @type {HTMLElement | null} */ (body.querySelector(`a[href="${CSS.escape(focused)}"]`))?.focus();
  }

  /** @param {HTMLElement} body @param {Map<string, string> | null} previous */
  renderRows(body, previous) {
    const paged = this.query.has('cursor');
    const info = new Map(this.attemptInfo);
    const shown = this.query.get('latest') ? latestOnly(this.runs, info) : this.runs;
    const group = this.query.get('group');
    render(body, html`${group ? this.groupHeader(group) : ''}<div class="table-wrap"><table class="runs">
      <caption class="sr-only">Runs, newest first</caption>
      ${runHead()}
      <tbody>${shown.map((r) =>
        runRow(r, previous !== null && previous.get(runKey(r)) !== JSON.stringify(r), info.get(runKey(r))))}</tbody>
    </table></div>
    <nav class="pager" aria-label="Pages">
      ${paged ? html`<a class="button" href="${hashLink(['runs'], this.filterParams())}">← Newest</a>` : ''}
      ${this.nextCursor ? html`<a class="button" data-role="older"
        href="${hashLink(['runs'], { ...this.filterParams(), cursor: this.nextCursor })}">Older →</a>` : ''}
    </nav>`);
  }

  /**
   * The group view says what it is: one retry chain, its attempts oldest first and which one is the latest.
   * @param {string} group
   */
  groupHeader(group) {
    const ordered = this.runs.slice().sort((a, b) => String(a.started_at).localeCompare(String(b.started_at)));
    const latest = ordered[ordered.length - 1];
    const attempts = `${ordered.length} attempt${ordered.length === 1 ? '' : 's'}${this.nextCursor ? '+' : ''}`;
    return html`<section class="panel group-view" aria-label="Retry group">
      <h2>Retry group <span class="mono">${group}</span>: ${attempts}</h2>
      <ol class="attempt-chain">${ordered.map((r, i) => html`<li><a href="${runLink(r)}">attempt ${i + 1}</a>
        <span class="mono">${r.run}</span> ${r.status}${r === latest ? html` <strong>(latest)</strong>` : ''}</li>`)}
      </ol>
    </section>`;
  }

  renderBanner() {
    const blocked = this.runs.filter((r) => r.status === 'blocked');
    const banner = /** @type {HTMLElement} */ (this.querySelector('[data-role=banner]'));
    render(banner, blocked.length === 0 ? html`` : html`<div class="banner banner-blocked" role="status">
      <strong>${blocked.length === 1
        ? '1 run is waiting for an answer'
        : `${blocked.length} runs are waiting for an answer`}</strong>
      <ul>${blocked.slice(0, 5).map((r) => html`<li><a href="${runLink(r)}">${r.brief || r.run}</a>${r.question
        ? html` — <span class="muted">${r.question}</span>`
        : ''}</li>`)}</ul>
    </div>`);
  }

  filterParams() {
    /** @type {Record<string, string>} */
    const out = {};
    for (const k of FILTER_KEYS) {
      const v = this.query.get(k);
      if (v) out[k] = v;
    }
    return out;
  }

  /** @param {import('../lib/sse.js').StreamEvent} event */
  onEvent(event) {
    const data = event.data ?? {};
    const id = { source: data.source, run: data.run };
    if (!this.query.has('cursor')) {
      // The newest page re-reads itself (new runs may match the filters); bursts of events cost one request.
      clearTimeout(this.refreshTimer);
      this.refreshTimer = setTimeout(() => void this.load(true), 250);
      return;
    }
    const known = typeof id.source === 'string' && typeof id.run === 'string' &&
      this.runs.some((r) => runKey(r) === runKey(/** @type {any} */ (id)));
    if (known) {
      void this.refreshRow(id);
    }
  }

  /** @param {{source: string, run: string}} id */
  async refreshRow(id) {
    try {
      const fresh = await api(runPath(id));
      const run = fresh?.run && typeof fresh.run === 'object' ? fresh.run : fresh;
      const previous = new Map(this.runs.map((r) => [runKey(r), JSON.stringify(r)]));
      this.runs = this.runs.map((r) => (runKey(r) === runKey(run) ? run : r));
      this.renderTable(previous);
    } catch {
      // Deleted or unreachable: the next full load settles it.
    }
  }

  /** Keeps the durations of unfinished runs ticking. */
  tick() {
    for (const cell of this.querySelectorAll('td[data-started]')) {
      const started = cell.getAttribute('data-started');
      const status = cell.getAttribute('data-run-status') ?? '';
      if (started) cell.textContent = runDuration({ status, started_at: started, ended_at: null });
    }
  }
}

export function registerRunsPage() {
  if (!customElements.get('svc-runs-page')) customElements.define('svc-runs-page', RunsPage);
}
