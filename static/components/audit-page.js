// @ts-check
// <svc-audit-page>: every mutating action as a hash chain. The page re-checks the links it shows
// (each entry's prev_hash is the next older entry's hash) and says whether the shown chain is intact.
import { html } from '../lib/html.js';
import { PagedList } from '../lib/paged-list.js';
import { timeTag } from '../lib/time.js';

/** Index of the first entry whose link to the next older one is broken, or -1. @param {any[]} items newest first */
export function brokenLink(items) {
  for (let i = 0; i + 1 < items.length; i++) if (items[i].prev_hash !== items[i + 1].hash) return i;
  return -1;
}

class AuditPage extends PagedList {
  get spec() {
    return {
      title: 'Audit log',
      intro: 'Every action that changed something: who, from where, what, and how it ended. Newest first.',
      path: '/v1/audit',
      empty: 'Nothing has been audited yet. Starting, stopping, answering and config changes appear here.',
    };
  }

  /** @param {any[]} items */
  view(items) {
    const broken = brokenLink(items);
    /** @param {number} i */
    const onBreak = (i) => broken !== -1 && (i === broken || i === broken + 1);
    /** @param {any} a */
    const outcome = (a) => String(a.outcome ?? '').replace(/[^a-z_]/g, '');
    return html`${broken === -1
        ? html`<p class="notice ok">Hash chain intact for the ${items.length} entries shown.</p>`
        : html`<p class="notice error" role="alert">Hash chain broken between entries ${items[broken].id} and
          ${items[broken + 1].id}: the log was altered.</p>`}
      <div class="table-wrap"><table class="data audit">
      <caption class="sr-only">Audit log</caption>
      <thead><tr><th scope="col">When</th><th scope="col">Action</th><th scope="col">Target</th>
        <th scope="col">Outcome</th><th scope="col">Actor</th><th scope="col">Peer</th>
        <th scope="col">Hash</th></tr></thead>
      <tbody>${items.map((a, i) => html`<tr class="${onBreak(i) ? 'chain-broken' : ''}">
        <td data-label="When">${timeTag(a.at ?? a.created_at, { mode: 'absolute', seconds: true })}</td>
        <td data-label="Action" class="mono">${a.action}</td>
        <td data-label="Target" class="mono">${a.target ?? '—'}</td>
        <td data-label="Outcome"><span class="badge outcome-${outcome(a)}">${a.outcome}</span>${a.detail
          ? html`<div class="muted">${typeof a.detail === 'string' ? a.detail : JSON.stringify(a.detail)}</div>`
          : ''}</td>
        <td data-label="Actor">${a.actor}</td>
        <td data-label="Peer" class="mono">${a.peer}</td>
        <td data-label="Hash" class="mono" title="${a.hash ?? ''}">${String(a.hash ?? '').slice(0, 10)}</td>
      </tr>`)}</tbody></table></div>`;
  }
}

export function registerAuditPage() {
  if (!customElements.get('svc-audit-page')) customElements.define('svc-audit-page', AuditPage);
}
