// @ts-check
// Renders API objects whose exact fields vary (catalog answers) as a readable table: times as dates,
// booleans as yes/no words, nested values as compact JSON. All through the escaping template.
import { html } from './html.js';
import { label } from './format.js';
import { timeTag } from './time.js';

/** @param {string} key @param {unknown} value */
export function cell(key, value) {
  if (value === null || value === undefined || value === '') return html`<span class="muted">—</span>`;
  if (typeof value === 'boolean') {
    return html`<span class="badge ${value ? 'yes' : 'no'}">${value ? 'yes' : 'no'}</span>`;
  }
  if (/(_at|^at|^ts)$/.test(key) && (typeof value === 'string' || typeof value === 'number')) {
    return timeTag(value, { mode: 'absolute' });
  }
  if (typeof value === 'object') return html`<code class="json">${JSON.stringify(value)}</code>`;
  if (typeof value === 'string' && /^https?:\/\//.test(value)) {
    return html`<a href="${value}" rel="noopener noreferrer" target="_blank">${value}</a>`;
  }
  return html`${String(value)}`;
}

/**
 * @param {Record<string, unknown>[]} items
 * @param {{columns?: string[], caption: string}} opts
 */
export function dataTable(items, opts) {
  const columns = opts.columns ?? [...new Set(items.flatMap((i) => Object.keys(i)))];
  return html`<div class="table-wrap"><table class="data">
    <caption class="sr-only">${opts.caption}</caption>
    <thead><tr>${columns.map((c) => html`<th scope="col">${label(c)}</th>`)}</tr></thead>
    <tbody>${items.map((item) => html`<tr>${columns.map((c) =>
      html`<td data-label="${label(c)}">${cell(c, item[c])}</td>`)}</tr>`)}</tbody>
  </table></div>`;
}
