// @ts-check
// <svc-merge-page>: the merge queue — what waits to be merged and in which order, add a run, run the queue.
// The server re-checks every entry (PR, accepted receipt) when it merges; refusals are shown as they come back.
import { html, render } from '../lib/html.js';
import { api, itemsOf } from '../lib/api.js';
import { runLink } from '../lib/route.js';
import { loading, failure, empty, refusedNotice } from '../lib/ui.js';
import { timeTag } from '../lib/time.js';
import { confirmAction } from './confirm-dialog.js';

/** "local/r01…" or a run URL/hash → {source, run}; a bare id means source "local". @param {string} text */
export function parseRunRef(text) {
  const t = text.trim().replace(/^.*#\/runs\//, '');
  const parts = t.split('/').filter(Boolean);
  if (parts.length === 1) return { source: 'local', run: parts[0] ?? '' };
  return { source: parts[parts.length - 2] ?? '', run: parts[parts.length - 1] ?? '' };
}

class MergePage extends HTMLElement {
  connectedCallback() {
    render(this, html`<div class="page-head"><h1>Merge queue</h1><p class="muted">Runs with a pull request and an
      accepted receipt, merged in order; each is checked again before it merges.</p></div>
      <form class="filters" data-role="add" aria-label="Add a run to the merge queue">
        <div class="field grow"><label for="m-run">Run</label><input id="m-run" name="run" required
          placeholder="local/r01… or paste a run link" autocomplete="off" spellcheck="false"></div>
        <div class="field actions"><button type="submit" class="primary">Add to queue</button>
          <button type="button" data-action="merge">Merge now</button></div>
      </form>
      <div data-role="message" aria-live="polite"></div>
      <div data-role="body">${loading('Loading the merge queue')}</div>`);
    this.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.add(/** @type {HTMLFormElement} */ (event.target));
    });
    this.addEventListener('click', (event) => {
      const target = event.target instanceof Element ? event.target : null;
      if (target?.closest('[data-action=retry]')) void this.load();
      if (target?.closest('[data-action=merge]')) void this.merge();
    });
    void this.load();
  }

  async load() {
    const body = /** @type {HTMLElement} */ (this.querySelector('[data-role=body]'));
    try {
      const items = itemsOf(await api('/v1/merge/queue'), 'queue');
      render(body, items.length === 0
        ? empty('The merge queue is empty.', html`<p class="muted">Add a run that has a pull request and a verified
          receipt.</p>`)
        : html`<div class="table-wrap"><table class="data">
        <caption class="sr-only">Merge queue, in merge order</caption>
        <thead><tr><th scope="col">#</th><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Detail</th>
          <th scope="col">Added</th></tr></thead>
        <tbody>${items.map((m, i) => html`<tr>
          <td data-label="#">${m.position ?? i + 1}</td>
          <td data-label="Run"><a class="mono"
            href="${runLink({ source: m.source ?? 'local', run: m.run })}">${m.source ?? 'local'}/${m.run}</a>${m.brief
            ? html`<div class="muted">${m.brief}</div>` : ''}</td>
          <td data-label="Status">
            <span class="badge merge-${String(m.status ?? '').replace(/[^a-z_]/g, '')}">${m.status ?? '—'}</span></td>
          <td data-label="Detail">${m.pr_url
            ? html`<a href="${m.pr_url}" rel="noopener noreferrer" target="_blank">${m.pr_url}</a> `
            : ''}${typeof m.detail === 'string' ? m.detail : m.detail ? JSON.stringify(m.detail) : ''}</td>
          <td data-label="Added">${timeTag(m.added_at, { mode: 'absolute' })}</td>
        </tr>`)}</tbody></table></div>`);
    } catch (err) {
      render(body, failure(err));
    }
  }

  /** @param {HTMLFormElement} form */
  async add(form) {
    const ref = parseRunRef(String(new FormData(form).get('run') ?? ''));
    if (!ref.run) return this.message(null, 'Enter a run as source/run.');
    try {
      await api('/v1/merge/queue', { method: 'POST', body: ref });
      form.reset();
      this.message(null, `Added ${ref.source}/${ref.run} to the queue.`, true);
      void this.load();
    } catch (err) {
      this.message(err, 'Not added.');
    }
  }

  async merge() {
    const ok = await confirmAction({
      title: 'Merge the queue now?',
      body: 'Each queued pull request is checked again and merged in order; entries that no longer qualify are' +
        ' skipped with a reason.',
      confirm: 'Merge',
    });
    if (!ok) return;
    try {
      const result = await api('/v1/merge/run', { method: 'POST', body: {} });
      const merged = itemsOf(result, 'merged').length;
      const count = result && typeof result === 'object' && 'merged' in result
        ? `: ${Array.isArray(result.merged) ? merged : result.merged} merged`
        : '';
      this.message(null, `Merge run finished${count}.`, true);
      void this.load();
    } catch (err) {
      this.message(err, 'Merge refused.');
    }
  }

  /** @param {unknown} err @param {string} text @param {boolean} [ok] */
  message(err, text, ok = false) {
    const box = /** @type {HTMLElement} */ (this.querySelector('[data-role=message]'));
    render(box, err
      ? refusedNotice(text, err)
      : html`<p class="notice ${ok ? 'ok' : 'error'}" role="status">${text}</p>`);
  }
}

export function registerMergePage() {
  if (!customElements.get('svc-merge-page')) customElements.define('svc-merge-page', MergePage);
}
