// @ts-check
// <svc-notifications-page>: outbound messages about runs (completion summaries to chats and trackers) and whether
// they were delivered.
import { html } from '../lib/html.js';
import { PagedList } from '../lib/paged-list.js';
import { runLink } from '../lib/route.js';
import { timeTag } from '../lib/time.js';

class NotificationsPage extends PagedList {
  get spec() {
    return {
      title: 'Notifications',
      intro: 'Completion summaries sent back to where runs came from, newest first.',
      path: '/v1/notifications',
      empty: 'No notifications yet. They are recorded when a run started from a chat or tracker finishes.',
    };
  }

  /** @param {any[]} items */
  view(items) {
    return html`<div class="table-wrap"><table class="data">
      <caption class="sr-only">Notifications</caption>
      <thead><tr><th scope="col">When</th><th scope="col">Status</th><th scope="col">Origin</th>
        <th scope="col">Channel</th><th scope="col">Run</th><th scope="col">Message</th>
        <th scope="col" class="num">Attempts</th></tr></thead>
      <tbody>${items.map((n) => html`<tr>
        <td data-label="When">${timeTag(n.created_at ?? n.updated_at, { mode: 'absolute', seconds: true })}</td>
        <td data-label="Status">
          <span class="badge delivery-${String(n.status ?? '').replace(/[^a-z_]/g, '')}">${n.status ?? '—'}</span></td>
        <td data-label="Origin">${n.origin ?? '—'}${n.reported_by
          ? html`<div class="muted">reported by <span class="mono">${n.reported_by}</span></div>`
          : ''}</td>
        <td data-label="Channel">${n.channel ?? '—'}${n.target
          ? html`<div class="muted mono">${n.target}</div>`
          : ''}</td>
        <td data-label="Run">${n.run
          ? html`<a class="mono" href="${runLink({ source: n.source ?? 'local', run: n.run })}">${n.run}</a>`
          : n.job_id ? html`<span class="mono">job ${n.job_id}</span>` : '—'}</td>
        <td data-label="Message">${n.message ?? ''}${n.error
          ? html`<div class="field-error">${n.error}</div>`
          : ''}</td>
        <td data-label="Attempts" class="num">${n.attempts ?? 0}</td>
      </tr>`)}</tbody></table></div>`;
  }
}

export function registerNotificationsPage() {
  if (!customElements.get('svc-notifications-page')) customElements.define('svc-notifications-page', NotificationsPage);
}
