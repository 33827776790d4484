// @ts-check
// <svc-config-page>: edit the Control Plane config. Saves send only changed keys with If-Match: <version>;
// a validation error is shown next to the key it names, and a lost update (409) is explained, edits kept.
import { html, render } from '../lib/html.js';
import { api } from '../lib/api.js';
import { loading, failure, refusedNotice } from '../lib/ui.js';
import { configField, changedValues, fieldId, orderedKeys } from '../lib/config-fields.js';
import { providersClick } from '../lib/config-providers.js';
import { registerKeysPanel } from './keys-panel.js';

class ConfigPage extends HTMLElement {
  constructor() {
    super();
    /** @type {Record<string, unknown>} */
    this.config = {};
    this.version = 0;
  }

  connectedCallback() {
    registerKeysPanel();
    this.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.save(/** @type {HTMLFormElement} */ (event.target));
    });
    this.addEventListener('click', (event) => {
      const target = event.target;
      if (providersClick(event)) return;
      if (target instanceof Element && target.closest('[data-action=retry], [data-action=reload]')) void this.load();
    });
    void this.load();
  }

  async load() {
    render(this, html`<div class="page-head"><h1>Config</h1></div>${loading('Loading config')}`);
    try {
      const body = await api('/v1/config');
      this.config = body?.config ?? {};
      this.version = Number(body?.version ?? 0);
      this.renderForm();
    } catch (err) {
      render(this, html`<div class="page-head"><h1>Config</h1></div>${failure(err)}`);
    }
  }

  renderForm() {
    const keys = orderedKeys(Object.keys(this.config));
    render(this, html`<div class="page-head"><h1>Config</h1><p class="muted">Version
        <span data-role="version">${this.version}</span>. Secrets show as *** and keep their value unless you type a new
        one. Saving needs a Control Plane bound to this machine.</p></div>
      <form class="panel config-form" novalidate>
        ${keys.length === 0
          ? html`<p class="muted">No settings.</p>`
          : keys.map((k) => configField(k, this.config[k], this.config))}
        <div class="row"><button type="submit" class="primary">Save changes</button><button type="button"
          data-action="reload">Discard and reload</button></div>
        <div data-role="message" aria-live="polite"></div>
      </form>
      <svc-keys-panel></svc-keys-panel>`);
  }

  /** @param {HTMLFormElement} form */
  async save(form) {
    const message = /** @type {HTMLElement} */ (form.querySelector('[data-role=message]'));
    for (const el of form.querySelectorAll('.field-error')) /** @type {HTMLElement} */ (el).hidden = true;
    for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
    let changes;
    try {
      changes = changedValues(form, this.config);
    } catch (err) {
      const e = /** @type {{key: string, message: string}} */ (err);
      this.fieldError(e.key, e.message);
      return;
    }
    if (Object.keys(changes).length === 0) {
      render(message, html`<p class="muted">Nothing changed.</p>`);
      return;
    }
    try {
      const headers = { 'if-match': `"${this.version}"` };
      const body = await api('/v1/config', { method: 'PUT', body: { config: changes }, headers });
      this.config = body?.config ?? this.config;
      this.version = Number(body?.version ?? this.version + 1);
      this.renderForm();
      const saved = /** @type {HTMLElement} */ (this.querySelector('[data-role=message]'));
      render(saved, html`<p class="notice ok" role="status">Saved ${Object.keys(changes).join(', ')}
        (version ${this.version}).</p>`);
    } catch (err) {
      this.saveFailed(message, /** @type {{code?: string, message?: string, field?: string | null}} */ (err));
    }
  }

  /** @param {HTMLElement} message @param {{code?: string, message?: string, field?: string | null}} e */
  saveFailed(message, e) {
    // The server names the setting in the envelope's `field`; only a setting on this form gets the message beside it.
    const key = e.field && Object.hasOwn(this.config, e.field) ? e.field : null;
    if (e.code === 'conflict') {
      render(message, html`<div class="notice error" role="alert">
        <strong>Not saved: the config changed since you opened it.</strong>
        Someone (or another tab) saved a newer version first, and saving yours would overwrite theirs.
        Your edits are still in the form: note them, <button type="button" class="link-button"
        data-action="reload">load the latest version</button>, and apply them again.
        <span class="muted">${e.message ?? ''}</span></div>`);
    } else if (key && e.code === 'invalid_param') {
      this.fieldError(key, e.message ?? '');
      render(message, html`<p class="field-error" role="alert">Not saved: fix the highlighted setting.</p>`);
    } else {
      render(message, refusedNotice('Not saved.', e));
    }
  }

  /** @param {string} key @param {string} text */
  fieldError(key, text) {
    const id = fieldId(key);
    const error = /** @type {HTMLElement | null} */ (this.querySelector(`#${CSS.escape(id)}-error`));
    const input = /** @type {HTMLElement | null} */ (this.querySelector(`#${CSS.escape(id)}`));
    if (error) {
      error.textContent = text;
      error.hidden = false;
    }
    input?.setAttribute('aria-invalid', 'true');
    input?.focus();
  }
}

export function registerConfigPage() {
  if (!customElements.get('svc-config-page')) customElements.define('svc-config-page', ConfigPage);
}
