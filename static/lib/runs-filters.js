// @ts-check
// The runs filter form: markup from the hash query, and the hash query from the form. Filters live in the URL
// so a filtered view can be bookmarked and shared.
import { html } from './html.js';

export const FILTER_KEYS = /** @type {const} */ (['verdict', 'repo', 'since', 'until', 'group']);
const VERDICTS = ['verified', 'verified_with_gaps', 'not_verified'];

/** @param {URLSearchParams} query @param {string[]} repos */
export function filtersForm(query, repos) {
  const verdict = query.get('verdict') ?? '';
  return html`<form class="filters" data-role="filters" aria-label="Filter runs">
    <div class="field">
      <label for="f-verdict">Verdict</label>
      <select id="f-verdict" name="verdict">
        <option value="">Any</option>
        ${VERDICTS.map((v) => html`<option value="${v}" ${v === verdict ? html`selected` : ''}>${v.replace(/_/g, ' ')}</option>`)}
      </select>
    </div>
    <div class="field">
      <label for="f-repo">Repo</label>
      <input id="f-repo" name="repo" list="f-repos" value="${query.get('repo') ?? ''}" placeholder="owner/name" autocomplete="off">
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
      <input id="f-group" name="group" value="${query.get('group') ?? ''}" placeholder="retry chain id" autocomplete="off" spellcheck="false">
    </div>
    <div class="field actions">
      <button type="submit" class="primary">Apply</button>
      <button type="reset" data-role="clear">Clear</button>
    </div>
  </form>`;
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

/** A date input's day as an ISO instant: since = local midnight, until = the end of that local day. @param {string} day @param {'start'|'end'} edge */
export function dayToIso(day, edge) {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return day;
  const [y, m, d] = day.split('-').map(Number);
  const date = edge === 'start' ? new Date(y ?? 0, (m ?? 1) - 1, d) : new Date(y ?? 0, (m ?? 1) - 1, (d ?? 1) + 1, 0, 0, 0, -1);
  return date.toISOString();
}

/** API query for GET /v1/runs from the hash query. @param {URLSearchParams} query */
export function apiFilters(query) {
  return {
    verdict: query.get('verdict'),
    repo: query.get('repo'),
    since: query.get('since') ? dayToIso(query.get('since') ?? '', 'start') : null,
    until: query.get('until') ? dayToIso(query.get('until') ?? '', 'end') : null,
    group_id: query.get('group'),
    cursor: query.get('cursor'),
  };
}
