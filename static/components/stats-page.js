// @ts-check
// <svc-stats-page>: summary cards and inline SVG charts from /v1/stats and /v1/stats/cost. Unmeasured cost is
// reported as unknown (with how many runs it affects), never folded into a $0.
import { html, render } from '../lib/html.js';
import { api, query } from '../lib/api.js';
import { hashLink } from '../lib/route.js';
import { loading, failure } from '../lib/ui.js';
import { money, count, percent } from '../lib/format.js';
import { duration } from '../lib/time.js';
import { columnChart, barList, hatchLegend, utcDays } from '../lib/charts.js';
import { day as localDay } from '../lib/time.js';

const WINDOWS = [
  { value: '7', label: 'Last 7 days' },
  { value: '30', label: 'Last 30 days' },
  { value: '90', label: 'Last 90 days' },
  { value: 'all', label: 'All time' },
];


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
    const repo = String(data.get('repo') ?? '').trim();
    location.hash = hashLink(['stats'], { window: String(data.get('window') ?? ''), repo });
  }

  async load() {
    const repo = this.route?.query.get('repo') ?? '';
    const days = this.windowDays;
    render(this, html`<div class="page-head"><h1>Stats &amp; cost</h1></div>
      <form class="filters" aria-label="Stats window">
        <div class="field"><label for="s-window">Window</label><select id="s-window" name="window">
          ${WINDOWS.map((w) => html`<option value="${w.value}"
            ${w.value === days ? html`selected` : ''}>${w.label}</option>`)}</select></div>
        <div class="field"><label for="s-repo">Repo</label><input id="s-repo" name="repo" value="${repo}"
          placeholder="all repos"></div>
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

  /** Filters for the runs list that show the runs a card counts. @param {Record<string, string>} extra */
  runsLink(extra) {
    const days = this.windowDays;
    const since = days === 'all' ? '' : localDay(Date.now() - Number(days) * 86_400_000);
    return hashLink(['runs'], { since, repo: this.route?.query.get('repo') ?? '', ...extra });
  }

  /** @param {any} s @param {any} c */
  view(s, c) {
    const perDay = Array.isArray(s.per_day) ? s.per_day : [];
    const costDay = Array.isArray(c.per_day) ? c.per_day : [];
    const days = this.dayAxis(perDay, costDay);
    const span = days.length ? ` (${days[0]} to ${days[days.length - 1]})` : '';
    const caption = `Days are UTC days${span}; hover a bar for its figures.`;
    return html`${this.summaryCards(s, c)}
    ${this.verdictCards(s)}
    <div class="charts">
      ${this.dayCharts(days, perDay, costDay, caption)}
      <section class="panel"><h2>Cost by provider</h2>${barList(this.costPoints(c.by_provider, 'provider'),
        { label: 'Cost by provider', format: money, kind: 'provider' })}</section>
      <section class="panel"><h2>Cost by repo</h2>${barList(this.costPoints(c.by_repo, 'repo'),
        { label: 'Cost by repo', format: money, kind: 'repo' })}</section>
    </div>`;
  }

  /** The cards of the window's totals, each a link to the runs it counts. @param {any} s @param {any} c */
  summaryCards(s, c) {
    const unknownRuns = Number(c.runs_unknown_cost ?? 0);
    const byStatus = s.by_status ?? {};
    const noRuns = Number(s.runs ?? 0) === 0;
    const none = 'no runs in this window';
    const costNote = noRuns ? none : unknownRuns > 0
      ? html`<strong class="warn">${count(unknownRuns)} run${unknownRuns === 1 ? '' : 's'} with unknown cost</strong>
        not included`
      : 'every run’s cost is known';
    return html`<div class="cards">
      <a class="card" href="${this.runsLink({})}"><h2>Runs</h2><p class="big">${count(s.runs)}</p>
        <p class="muted">${count(byStatus.running ?? 0)} running · ${count(byStatus.queued ?? 0)} queued</p></a>
      <a class="card${(byStatus.blocked ?? 0) > 0 ? ' card-alert' : ''}" href="${this.runsLink({ status: 'blocked' })}">
        <h2>Waiting for an answer</h2><p class="big">${count(byStatus.blocked ?? 0)}</p>
        <p class="muted">blocked runs</p></a>
      <a class="card" href="${this.runsLink({ status: 'failed' })}" title="Show the failed runs"><h2>Success rate</h2>
        <p class="big">${noRuns ? '—' : percent(s.success_rate)}</p>
        <p class="muted">${noRuns ? none : `of ${count(s.terminal)} finished runs`}</p></a>
      <a class="card" href="${this.runsLink({})}"><h2>Duration</h2><p class="big">${duration(s.duration_ms?.p50)}</p>
        <p class="muted">${noRuns ? none : html`median · p95 ${duration(s.duration_ms?.p95)}`}</p></a>
      <a class="card" href="${this.runsLink({})}"><h2>Cost</h2>
        <p class="big${!noRuns && c.total_usd == null ? ' unknown' : ''}">${noRuns ? '—' : money(c.total_usd)}</p>
        <p class="muted">${costNote}</p></a>
      <a class="card" href="${this.runsLink({})}"><h2>Tokens</h2><p class="big">${noRuns ? '—' : count(c.tokens_in)}</p>
        <p class="muted">${noRuns ? none : html`in · ${count(c.tokens_out)} out`}</p></a>
    </div>`;
  }

  /** One card per verdict; "no verdict" counts the runs no verdict covers. @param {any} s */
  verdictCards(s) {
    const byVerdict = s.by_verdict ?? {};
    const verdicts = ['verified', 'verified_with_gaps', 'not_verified'];
    const withVerdict = verdicts.reduce((n, k) => n + Number(byVerdict[k] ?? 0), 0);
    /** @param {string} v */
    const runsOf = (v) => (v === 'none' ? Math.max(0, Number(s.runs ?? 0) - withVerdict) : byVerdict[v] ?? 0);
    return html`<div class="cards verdicts">
      ${[...verdicts, 'none'].map((v) => html`<a class="card small" href="${this.runsLink({ verdict: v })}">
        <h2>${v === 'none' ? 'no verdict' : v.replace(/_/g, ' ')}</h2>
        <p class="big verdict-text-${v}">${count(runsOf(v))}</p>
      </a>`)}
    </div>`;
  }

  /**
   * The three charts over the day axis: runs, success rate and cost per day.
   * @param {string[]} days @param {any[]} perDay @param {any[]} costDay @param {string} caption
   */
  dayCharts(days, perDay, costDay, caption) {
    const runsOn = new Map(perDay.map((/** @type {any} */ d) => [d.date, d]));
    const costOn = new Map(costDay.map((/** @type {any} */ d) => [d.date, d]));
    /** @param {string} date */
    const label = (date) => date.slice(5);
    const runs = days.map((d) => {
      const n = Number(runsOn.get(d)?.runs ?? 0);
      return { label: label(d), value: n, title: `${d}: ${count(n)} runs` };
    });
    const rates = days.map((d) => {
      const r = runsOn.get(d);
      const finished = r ? Number(r.succeeded) + Number(r.failed) : 0;
      const rate = finished > 0 ? Number(r.succeeded) / finished : 0;
      return finished > 0
        ? { label: label(d), value: rate, title: `${d}: ${percent(rate)} of ${finished} finished` }
        : { label: label(d), value: null, none: true, title: `${d}: nothing finished` };
    });
    const costs = days.map((d) => {
      const k = costOn.get(d);
      const unknown = Number(k?.runs_unknown_cost ?? 0);
      const value = k ? (k.cost_usd ?? null) : 0;
      const extra = unknown ? ` + ${unknown} run${unknown === 1 ? '' : 's'} of unknown cost` : '';
      const title = `${d}: ${value === null ? 'unknown' : money(value)}${extra}`;
      return { label: label(d), value, unknown: unknown > 0, title };
    });
    const hatched = costDay.some((/** @type {any} */ d) => d.runs_unknown_cost > 0)
      ? hatchLegend('hatched: cost not measured for some or all runs of that day (never counted as $0)')
      : '';
    return html`<section class="panel"><h2>Runs per day</h2>${columnChart(runs,
        { label: 'Runs per day', format: (n) => String(Math.round(n)), kind: 'runs', caption })}</section>
      <section class="panel"><h2>Success rate per day</h2>${columnChart(rates, {
        label: 'Success rate per day', format: (n) => `${Math.round(n * 100)}%`, max: 1, kind: 'rate', caption,
      })}</section>
      <section class="panel"><h2>Cost per day</h2>${columnChart(costs,
        { label: 'Cost per day in USD', format: money, kind: 'cost', caption })}
        ${hatched}</section>`;
  }

  /**
   * Every UTC day of the window, so days without runs stay on the axis.
   * @param {any[]} perDay @param {any[]} costDay
   */
  dayAxis(perDay, costDay) {
    const today = new Date().toISOString().slice(0, 10);
    const days = this.windowDays;
    const known = [...perDay, ...costDay].map((d) => String(d.date)).sort();
    const first = known[0];
    const windowStart = days === 'all'
      ? first
      : new Date(Date.now() - Number(days) * 86_400_000).toISOString().slice(0, 10);
    if (!windowStart) return [];
    const from = first && first < windowStart ? first : windowStart;
    const last = known[known.length - 1];
    return utcDays(from, last && last > today ? last : today);
  }

  /** @param {any} groups @param {string} key */
  costPoints(groups, key) {
    return (Array.isArray(groups) ? groups : []).map((g) => ({
      label: String(g[key] ?? 'unknown'),
      value: g.cost_usd ?? null,
      unknown: Number(g.runs_unknown_cost ?? 0) > 0,
      title: `${g[key] ?? 'unknown'}: ${money(g.cost_usd)} over ${g.runs} run${g.runs === 1 ? '' : 's'}` +
        (g.runs_unknown_cost ? `, ${g.runs_unknown_cost} of unknown cost` : ''),
    }));
  }
}

export function registerStatsPage() {
  if (!customElements.get('svc-stats-page')) customElements.define('svc-stats-page', StatsPage);
}
