// @ts-check
// Markup for one row of the runs table, shared by the runs page's first render and its live updates.
import { html } from './html.js';
import { statusBadge, verdictBadge } from './ui.js';
import { money, ago, dateTime, runDuration } from './format.js';
import { runLink, hashLink } from './route.js';

/** @typedef {{source: string, run: string, repo?: string|null, group_id?: string|null, status: string, verdict?: string|null, brief?: string|null, origin?: string|null, provider?: string|null, started_at?: string|null, ended_at?: string|null, cost_usd?: number|null, question?: string|null}} Run */

/** @param {Run} run */
export function runKey(run) {
  return `${run.source}/${run.run}`;
}

/** @param {Run} run @param {boolean} [flash] */
export function runRow(run, flash = false) {
  const classes = ['run-row', run.status === 'blocked' ? 'is-blocked' : '', flash ? 'flash' : ''].filter(Boolean).join(' ');
  return html`<tr class="${classes}" data-key="${runKey(run)}">
    <td data-label="Status">${statusBadge(run.status)}</td>
    <td data-label="Verdict">${verdictBadge(run.verdict)}</td>
    <td data-label="Repo" class="mono">${run.repo ? html`<a href="${hashLink(['runs'], { repo: run.repo })}" title="Only runs of ${run.repo}">${run.repo}</a>` : '—'}</td>
    <td data-label="Brief" class="brief"><a href="${runLink(run)}">${run.brief || run.run}</a>${run.status === 'blocked' && run.question ? html`<span class="question-hint">Asks: ${run.question}</span>` : ''}</td>
    <td data-label="Origin">${run.origin ?? '—'}</td>
    <td data-label="Provider">${run.provider ?? '—'}</td>
    <td data-label="Started" class="nowrap" title="${dateTime(run.started_at)}"><time datetime="${run.started_at ?? ''}">${ago(run.started_at)}</time></td>
    <td data-label="Duration" class="num" data-started="${run.ended_at ? '' : run.started_at ?? ''}">${runDuration(run)}</td>
    <td data-label="Cost" class="num${run.cost_usd == null ? ' unknown' : ''}">${money(run.cost_usd)}</td>
  </tr>`;
}
