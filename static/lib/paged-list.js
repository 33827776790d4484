// @ts-check
// A base for list pages over {items, next_cursor}: first page, "Load older" appends the next, plus the usual states.
import { html, render } from './html.js';
import { api, query, itemsOf } from './api.js';
import { loading, failure, empty } from './ui.js';

export class PagedList extends HTMLElement {
  constructor() {
    super();
    /** @type {import('./route.js').Route | undefined} */
    this.route = undefined;
    /** @type {any[]} */
    this.items = [];
    /** @type {string | null} */
    this.cursor = null;
  }

  /** @returns {{title: string, intro: string, path: string, empty: string, limit?: number}} */
  get spec() {
    throw new Error('PagedList subclasses define spec');
  }

  connectedCallback() {
    this.addEventListener('click', (event) => {
      const target = event.target instanceof Element ? event.target : null;
      if (target?.closest('[data-action=retry]')) void this.load(false);
      if (target?.closest('[data-action=more]')) void this.load(true);
    });
    void this.load(false);
  }

  /** @param {boolean} more */
  async load(more) {
    const { title, intro, path, limit = 100 } = this.spec;
    if (!more) {
      this.items = [];
      this.cursor = null;
      render(this, html`<div class="page-head"><h1>${title}</h1><p class="muted">${intro}</p></div>
        <div data-role="body">${loading(`Loading ${title.toLowerCase()}`)}</div>`);
    }
    const body = /** @type {HTMLElement} */ (this.querySelector('[data-role=body]'));
    try {
      const answer = await api(`${path}${query({ limit, cursor: more ? this.cursor : null })}`);
      this.items = [...this.items, ...itemsOf(answer)];
      this.cursor = answer?.next_cursor ?? null;
      render(body, this.items.length === 0 ? empty(this.spec.empty) : html`${this.view(this.items)}
        ${this.cursor ? html`<p class="pager"><button type="button" data-action="more">Load older</button></p>` : ''}`);
    } catch (err) {
      render(body, failure(err));
    }
  }

  /** @param {any[]} _items @returns {import('./html.js').SafeHtml} */
  view(_items) {
    return html``;
  }
}
