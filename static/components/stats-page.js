// @ts-check
// <svc-stats-page>: summary cards and inline SVG charts from /v1/stats and /v1/stats/cost. Unmeasured cost is
// reported as unknown (with how many runs it affects), never folded into a $0.
import { html, render } from '../lib/html.js';
import { api, query } from '../lib/api.js';
import { hashLink } from '../lib/route.js';
import { loading, failure } from '../lib/ui.js';
import { money, count, percent, duration } from '../lib/format.js';
import { columnChart, barList } from '../lib/charts.js';

const WINDOWS = [
  { value: '7', label: 'Last 7 days' },
  { value: '30', label: 'Last 30 days' },
  { value: '90', label: 'Last 90 days' },
  { value: 'all', label: 'All time' },
];

/** @param {number} n */
const usdAxis = (n) => (n >= 10 ? `$${Math.round(n)}` : `$${n.toFixed(2)}`);

class StatsPage extends HTMLElement {
  constructor() {
    super();
    /** @type {import('../lib/route.js').Route | undefined} */
    this.route = undefined;
  }

  get windowDays() {
    return this.route?.query.get('window') ?? '30';
  }

  connectedCallback() {
    this.addEventListener('change', (event) => {
      const form = event.target instanceof Element ? event.target.closest('form') : null;
      if (form) this.apply(form);
    });
    this.addEventListener('submit', (event) => {
      event.preventDefault();
      this.apply(/** @type {HTMLFormElement} */ (event.target));
    });
    this.addEventListener('click', (event) => {
      if (event.target instanceof Element && event.target.closest('[data-action=retry]')) void this.load();
    });
    void this.load();
  }

  /** @param {import('../lib/route.js').Route} route */
  routeChanged(route) {
    this.route = route;
    void this.load();
    return true;
  }

  /** @param {HTMLFormElement} form */
  apply(form) {
    const data = new FormData(form);
    location.hash = hashLink(['stats'], { window: String(data.get('window') ?? ''), repo: String(data.get('repo') ?? '').trim() });
  }

  async load() {
    const repo = this.route?.query.get('repo') ?? '';
    const days = this.windowDays;
    render(this, html`<div class="page-head"><h1>Stats &amp; cost</h1></div>
      <form class="filters" aria-label="Stats window">
        <div class="field"><label for="s-window">Window</label><select id="s-window" name="window">
          ${WINDOWS.map((w) => html`<option value="${w.value}" ${w.value === days ? html`selected` : ''}>${w.label}</option>`)}</select></div>
        <div class="field"><label for="s-repo">Repo</label><input id="s-repo" name="repo" value="${repo}" placeholder="all repos"></div>
        <div class="field actions"><button type="submit" class="primary">Apply</button></div>
      </form>
      <div data-role="body">${loading('Loading stats')}</div>`);
    const body = /** @type {HTMLElement} */ (this.querySelector('[data-role=body]'));
    const since = days === 'all' ? null : new Date(Date.now() - Number(days) * 86_400_000).toISOString();
    const q = query({ since, repo });
    try {
      const [stats, cost] = await Promise.all([api(`/v1/stats${q}`), api(`/v1/stats/cost${q}`)]);
      render(body, this.view(stats ?? {}, cost ?? {}));
    } catch (err) {
      render(body, failure(err));
    }
  }

  /** @param {any} s @param {any} c */
  view(s, c) {
    const perDay = Array.isArray(s.per_day) ? s.per_day : [];
    const costDay = Array.isArray(c.per_day) ? c.per_day : [];
    const unknownRuns = Number(c.runs_unknown_cost ?? 0);
    const byStatus = s.by_status ?? {};
    const byVerdict = s.by_verdict ?? {};
    /** @param {string} date */
    const day = (date) => String(date).slice(5);
    return html`<div class="cards">
      <div class="card"><h2>Runs</h2><p class="big">${count(s.runs)}</p><p class="muted">${count(byStatus.running ?? 0)} running · ${count(byStatus.queued ?? 0)} queued</p></div>
      <div class="card${(byStatus.blocked ?? 0) > 0 ? ' card-alert' : ''}"><h2>Waiting for an answer</h2><p class="big">${count(byStatus.blocked ?? 0)}</p><p class="muted">blocked runs</p></div>
      <div class="card"><h2>Success rate</h2><p class="big">${percent(s.success_rate)}</p><p class="muted">of ${count(s.terminal)} finished runs</p></div>
      <div class="card"><h2>Duration</h2><p class="big">${duration(s.duration_ms?.p50)}</p><p class="muted">median · p95 ${duration(s.duration_ms?.p95)}</p></div>
      <div class="card"><h2>Cost</h2><p class="big${c.total_usd == null ? ' unknown' : ''}">${money(c.total_usd)}</p>
        <p class="muted">${unknownRuns > 0 ? html`<strong class="warn">${count(unknownRuns)} run${unknownRuns === 1 ? '' : 's'} with unknown cost</strong> not included` : 'every run’s cost is known'}</p></div>
      <div class="card"><h2>Tokens</h2><p class="big">${count(c.tokens_in)}</p><p class="muted">in · ${count(c.tokens_out)} out</p></div>
    </div>
    <div class="cards verdicts">
      ${['verified', 'verified_with_gaps', 'not_verified'].map((v) => html`<div class="card small"><h2>${v.replace(/_/g, ' ')}</h2><p class="big verdict-text-${v}">${count(byVerdict[v] ?? 0)}</p></div>`)}
    </div>
    <div class="charts">
      <section class="panel"><h2>Runs per day</h2>${columnChart(perDay.map((/** @type {any} */ d) => ({ label: day(d.date), value: Number(d.runs) })), { label: 'Runs per day', format: (n) => String(Math.round(n)) })}</section>
      <section class="panel"><h2>Success rate per day</h2>${columnChart(perDay.map((/** @type {any} */ d) => {
        const finished = Number(d.succeeded) + Number(d.failed);
        return { label: day(d.date), value: finished > 0 ? Number(d.succeeded) / finished : null, title: `${d.date}: ${finished > 0 ? percent(Number(d.succeeded) / finished) : 'nothing finished'}` };
      }), { label: 'Success rate per day', format: (n) => `${Math.round(n * 100)}%`, max: 1, kind: 'rate' })}</section>
      <section class="panel"><h2>Cost per day</h2>${columnChart(costDay.map((/** @type {any} */ d) => ({
        label: day(d.date), value: d.cost_usd ?? null,
        title: `${d.date}: ${money(d.cost_usd)}${d.runs_unknown_cost ? ` (+${d.runs_unknown_cost} run${d.runs_unknown_cost === 1 ? '' : 's'} of unknown cost)` : ''}`,
      })), { label: 'Cost per day in USD', format: usdAxis, kind: 'cost' })}
        ${costDay.some((/** @type {any} */ d) => d.runs_unknown_cost > 0) ? html`<p class="muted legend"><span class="swatch unknown"></span> hatched: days whose cost is unknown</p>` : ''}</section>
      <section class="panel"><h2>Cost by provider</h2>${barList(this.costPoints(c.by_provider, 'provider'), { label: 'Cost by provider', format: money })}</section>
      <section class="panel"><h2>Cost by repo</h2>${barList(this.costPoints(c.by_repo, 'repo'), { label: 'Cost by repo', format: money })}</section>
    </div>`;
  }

  /** @param {any} groups @param {string} key */
  costPoints(groups, key) {
    return (Array.isArray(groups) ? groups : []).map((g) => ({
      label: String(g[key] ?? 'unknown'),
      value: g.cost_usd ?? null,
      title: `${g[key] ?? 'unknown'}: ${money(g.cost_usd)} over ${g.runs} run${g.runs === 1 ? '' : 's'}${g.runs_unknown_cost ? `, ${g.runs_unknown_cost} of unknown cost` : ''}`,
    }));
  }
}

export function registerStatsPage() {
  if (!customElements.get('svc-stats-page')) customElements.define('svc-stats-page', StatsPage);
}
