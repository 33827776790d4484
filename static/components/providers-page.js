// @ts-check
// <svc-providers-page>: the agent CLIs this Control Plane can drive, whether each is installed, where and which
// version.
import { html } from '../lib/html.js';
import { itemsOf } from '../lib/api.js';
import { empty } from '../lib/ui.js';
import { SimplePage } from '../lib/simple-page.js';

class ProvidersPage extends SimplePage {
  get spec() {
    return {
      title: 'Providers',
      intro: 'Coding-agent CLIs found on this machine and the command providers every run started here has: ' +
        'the operator\'s (operator.json) and the config\'s.',
      path: '/v1/providers',
    };
  }

  /** @param {any} data */
  view(data) {
    // GET /v1/providers answers a bare array (DESIGN §4); itemsOf also reads an older server's {"items": […]}.
    const items = itemsOf(data, 'providers');
    if (items.length === 0) return empty('No providers are known to this Control Plane.');
    return html`<ul class="tiles">${items.map((p) => html`<li class="tile ${p.available ? 'ok' : 'off'}">
      <h2>${p.name}</h2>
      <p>${p.available
        ? html`<span class="badge yes">available</span>`
        : html`<span class="badge no">not installed</span>`}${p.kind || p.type
        ? html` <span class="muted">${p.kind ?? p.type}</span>`
        : ''}${p.default ? html` <span class="badge">default</span>` : ''}</p>
      <dl class="facts one-col">
        <div><dt>Version</dt><dd>${p.version ?? '—'}</dd></div>
        <div><dt>Path</dt><dd class="mono">${p.path ?? '—'}</dd></div>
        ${Array.isArray(p.command) ? html`<div><dt>Command</dt><dd class="mono">${p.command.join(' ')}</dd></div>` : ''}
      </dl>
    </li>`)}</ul>`;
  }
}

export function registerProvidersPage() {
  if (!customElements.get('svc-providers-page')) customElements.define('svc-providers-page', ProvidersPage);
}
