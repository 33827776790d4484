// @ts-check
// <svc-keys-panel>: the public key(s) that sign Evidence Receipts (GET /v1/keys, loopback only), to copy into
// whatever verifies receipts elsewhere.
import { html, render } from '../lib/html.js';
import { api, itemsOf } from '../lib/api.js';
import { explain } from '../lib/ui.js';

class KeysPanel extends HTMLElement {
  connectedCallback() {
    render(this, html`<section class="panel" aria-labelledby="keys-title"><h2 id="keys-title">Receipt signing keys</h2>
      <div data-role="keys"><p class="muted">Loading…</p></div></section>`);
    void this.load();
  }

  async load() {
    const box = /** @type {HTMLElement} */ (this.querySelector('[data-role=keys]'));
    try {
      const body = await api('/v1/keys');
      const keys = itemsOf(body, 'keys').length
        ? itemsOf(body, 'keys')
        : body && typeof body === 'object' && body.kid ? [body] : [];
      render(box, keys.length === 0
        ? html`<p class="muted">No signing key yet: one is created when the first receipt is signed.</p>`
        : html`${keys.map((k) => html`<div class="key">
        <p>Key id <code>${k.kid ?? '—'}</code> ${k.alg || k.algorithm
          ? html`<span class="muted">${k.alg ?? k.algorithm}</span>`
          : ''}</p>
        <pre class="code">${k.pem ?? k.public_key_pem ?? JSON.stringify(k.jwk ?? k, null, 2)}</pre></div>`)}`);
    } catch (err) {
      const e = /** @type {{code?: string, message?: string}} */ (err);
      const text = e.code === 'loopback_only'
        ? 'Public keys are only listed on a Control Plane bound to this machine.'
        : `${explain(e.code)} ${e.message ?? ''}`;
      render(box, html`<p class="muted">${text}</p>`);
    }
  }
}

export function registerKeysPanel() {
  if (!customElements.get('svc-keys-panel')) customElements.define('svc-keys-panel', KeysPanel);
}
