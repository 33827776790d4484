// @ts-check
// The runs filter form: markup from the hash query, and the hash query from the form. Filters live in the URL
// so a filtered view can be bookmarked and shared.
import { html } from './html.js';
import { FAILURE_CLASSES, RUN_STATUSES } from './run-status.js';

export const FILTER_KEYS = /** @type {const} */ ([
  'status', 'verdict', 'failure', 'source', 'repo', 'since', 'until', 'group', 'latest',
]);
const VERDICTS = ['verified', 'verified_with_gaps', 'not_verified'];
/** Under this width the filter form starts folded so the runs are on the first screen. */
export const COMPACT_QUERY = '(max-width: 760px)';

/** @param {string} id @param {string} name @param {string} current @param {Array<[string, string]>} options */
function select(id, name, current, options) {
  return html`<select id="${id}" name="${name}">
    <option value="">Any</option>
    ${options.map(([value, text]) =>
      html`<option value="${value}" ${value === current ? html`selected` : ''}>${text}</option>`)}
  </select>`;
}

/** How many filters the query sets (the folded form says so). @param {URLSearchParams} query */
export function activeFilters(query) {
  return FILTER_KEYS.filter((k) => query.get(k)).length;
}

/** @param {URLSearchParams} query @param {string[]} repos @param {string[]} sources @param {boolean} open */
export function filtersForm(query, repos, sources = [], open = true) {
  const active = activeFilters(query);
  /** @type {Array<[string, string]>} */
  const statuses = RUN_STATUSES.map((s) => [s, s === 'blocked' ? 'needs answer' : s]);
  /** @type {Array<[string, string]>} */
  const verdicts = VERDICTS.map((v) => /** @type {[string, string]} */ ([v, v.replace(/_/g, ' ')]));
  verdicts.push(['none', 'no verdict']);
  /** @type {Array<[string, string]>} */
  const failures = FAILURE_CLASSES.map((c) => [c, c]);
  return html`<details class="filters-box" ${open ? html`open` : ''}>
    <summary>Filters${active ? html` <span class="badge count">${active} active</span>` : ''}</summary>
    <form class="filters" data-role="filters" aria-label="Filter runs">
    <div class="field">
      <label for="f-status">Status</label>
      ${select('f-status', 'status', query.get('status') ?? '', statuses)}
    </div>
    <div class="field">
      <label for="f-verdict">Verdict</label>
      ${select('f-verdict', 'verdict', query.get('verdict') ?? '', verdicts)}
    </div>
    <div class="field">
      <label for="f-failure">Failed for</label>
      ${select('f-failure', 'failure', query.get('failure') ?? '', failures)}
    </div>
    <div class="field">
      <label for="f-source">Source</label>
      <input id="f-source" name="source" list="f-sources" value="${query.get('source') ?? ''}" placeholder="e.g. local"
        autocomplete="off" spellcheck="false">
      <datalist id="f-sources">${sources.map((r) => html`<option value="${r}"></option>`)}</datalist>
    </div>
    <div class="field">
      <label for="f-repo">Repo</label>
      <input id="f-repo" name="repo" list="f-repos" value="${query.get('repo') ?? ''}" placeholder="owner/name"
        autocomplete="off">
      <datalist id="f-repos">${repos.map((r) => html`<option value="${r}"></option>`)}</datalist>
    </div>
    <div class="field">
      <label for="f-since">Since</label>
      <input id="f-since" name="since" type="date" value="${query.get('since') ?? ''}">
    </div>
    <div class="field">
      <label for="f-until">Until</label>
      <input id="f-until" name="until" type="date" value="${query.get('until') ?? ''}">
    </div>
    <div class="field">
      <label for="f-group">Group</label>
      <input id="f-group" name="group" value="${query.get('group') ?? ''}" placeholder="retry chain id"
        autocomplete="off" spellcheck="false">
    </div>
    <div class="field check-field">
      <label class="check"><input type="checkbox" name="latest" value="1" ${query.get('latest') ? html`checked` : ''}>
        Latest attempt only</label>
    </div>
    <div class="field actions">
      <button type="submit" class="primary">Apply</button>
      <button type="reset" data-role="clear">Clear</button>
    </div>
  </form></details>`;
}

/** Filter values from the form, empty ones dropped. @param {HTMLFormElement} form */
export function readFilters(form) {
  const data = new FormData(form);
  /** @type {Record<string, string>} */
  const out = {};
  for (const key of FILTER_KEYS) {
    const value = String(data.get(key) ?? '').trim();
    if (value) out[key] = value;
  }
  return out;
}

/**
 * A date input's day as an ISO instant: since = local midnight, until = the end of that local day.
 * @param {string} day @param {'start'|'end'} edge
 */
export function dayToIso(day, edge) {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return day;
  const [y, m, d] = day.split('-').map(Number);
  const date = edge === 'start'
    ? new Date(y ?? 0, (m ?? 1) - 1, d)
    : new Date(y ?? 0, (m ?? 1) - 1, (d ?? 1) + 1, 0, 0, 0, -1);
  return date.toISOString();
}

/** API query for GET /v1/runs from the hash query. @param {URLSearchParams} query */
export function apiFilters(query) {
  return {
    status: query.get('status'),
    source: query.get('source'),
    verdict: query.get('verdict'),
    failure: query.get('failure'),
    repo: query.get('repo'),
    since: query.get('since') ? dayToIso(query.get('since') ?? '', 'start') : null,
    until: query.get('until') ? dayToIso(query.get('until') ?? '', 'end') : null,
    group_id: query.get('group'),
    cursor: query.get('cursor'),
  };
}
