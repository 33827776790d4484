// @ts-check
// <svc-integrations-page>: each trigger route and whether its secret is configured (never the secret itself).
import { html } from '../lib/html.js';
import { itemsOf } from '../lib/api.js';
import { empty } from '../lib/ui.js';
import { SimplePage } from '../lib/simple-page.js';
import { dataTable } from '../lib/data-table.js';

class IntegrationsPage extends SimplePage {
  get spec() {
    return {
      title: 'Integrations',
      intro: 'Webhook routes of the trigger server and the service each fits (it reads that service\'s own '
        + 'signature headers): configured means its secret is set in the environment.',
      path: '/v1/integrations',
    };
  }

  /** @param {any} data */
  view(data) {
    let items = itemsOf(data, 'integrations');
    // A map of name → configured (or → details) is shown as rows too.
    if (items.length === 0 && data && typeof data === 'object' && !Array.isArray(data)) {
      const source = data.integrations && typeof data.integrations === 'object' ? data.integrations : data;
      items = Object.entries(source)
        .map(([name, v]) => (v && typeof v === 'object' ? { name, ...v } : { name, configured: v }));
    }
    if (items.length === 0) return empty('No integrations reported.');
    if (items.every((i) => typeof i.configured === 'boolean')) {
      return html`<ul class="tiles">${items.map((i) => html`<li class="tile ${i.configured ? 'ok' : 'off'}">
        <h2>${i.name ?? i.route ?? i.origin}</h2>
        ${typeof i.service === 'string' ? html`<p class="service">Fits ${i.service}</p>` : ''}
        <p>${i.configured
          ? html`<span class="badge yes">configured</span>`
          : html`<span class="badge no">not configured</span>`}</p>
        ${i.route ? html`<p class="mono">${i.method ?? 'POST'} ${i.route}</p>` : ''}
        ${Array.isArray(i.headers) && i.headers.length
          ? html`<p class="muted">Signed with ${i.headers.join(', ')}</p>`
          : ''}
        ${Array.isArray(i.variables ?? i.env)
          ? html`<p class="muted">Needs ${(i.variables ?? i.env).join(', ')}</p>`
          : i.variable ? html`<p class="muted">Needs ${i.variable}</p>` : ''}
      </li>`)}</ul>`;
    }
    return dataTable(items, { caption: 'Integrations' });
  }
}

export function registerIntegrationsPage() {
  if (!customElements.get('svc-integrations-page')) customElements.define('svc-integrations-page', IntegrationsPage);
}
