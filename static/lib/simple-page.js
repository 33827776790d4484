// @ts-check
// A base for read-only pages: fetch one API path, show loading / empty / error states, render the answer.
import { html, render } from './html.js';
import { api } from './api.js';
import { loading, failure } from './ui.js';

export class SimplePage extends HTMLElement {
  constructor() {
    super();
    /** @type {import('./route.js').Route | undefined} */
    this.route = undefined;
  }

  /** @returns {{title: string, intro?: import('./html.js').SafeHtml | string, path: string}} */
  get spec() {
    throw new Error('SimplePage subclasses define spec');
  }

  connectedCallback() {
    this.addEventListener('click', (event) => {
      if (event.target instanceof Element && event.target.closest('[data-action=retry]')) void this.load();
    });
    void this.load();
  }

  async load() {
    const { title, intro, path } = this.spec;
    render(this, html`<div class="page-head"><h1>${title}</h1>${intro ? html`<p class="muted">${intro}</p>` : ''}</div>
      <div data-role="body">${loading(`Loading ${title.toLowerCase()}`)}</div>`);
    const body = /** @type {HTMLElement} */ (this.querySelector('[data-role=body]'));
    try {
      render(body, this.view(await api(path)));
    } catch (err) {
      render(body, failure(err));
    }
  }

  /** @param {any} _data @returns {import('./html.js').SafeHtml} */
  view(_data) {
    return html``;
  }
}
