// @ts-check
// Markup for one row of the runs table, shared by the runs page's first render and its live updates.
// Under 760 px the same row is a compact card (style.css): status line, brief, one line of facts.
import { html } from './html.js';
import { statusBadge, verdictBadge } from './ui.js';
import { money } from './format.js';
import { timeTag, runDuration, isTicking } from './time.js';
import { runLink, hashLink } from './route.js';
import { failureText } from './run-status.js';

/**
 * @typedef {{
 *   source: string, run: string, repo?: string|null, group_id?: string|null, status: string, verdict?: string|null,
 *   brief?: string|null, origin?: string|null, provider?: string|null, branch?: string|null, pr_url?: string|null,
 *   started_at?: string|null, ended_at?: string|null, cost_usd?: number|null, question?: string|null,
 *   failure?: {class: string, reason: string, retryable: boolean}|null, trace_id?: string|null,
 * }} Run
 */
/**
 * Where a run stands in its retry group: attempt n of m; `earlier` attempts are folded into this row.
 * @typedef {{n: number, m: number, earlier?: number}} AttemptInfo
 */

/** @param {Run} run */
export function runKey(run) {
  return `${run.source}/${run.run}`;
}

/** "PR #42" for a GitHub-style pull URL, else the URL without its scheme. @param {string} url */
export function prLabel(url) {
  const m = /\/pull\/(\d+)(?:[/?#]|$)/.exec(url);
  return m ? `PR #${m[1]}` : url.replace(/^https?:\/\//, '');
}

/**
 * An identifier (source, owner/repo) that may wrap after "/", "-", "_" or ".", never inside a word: narrow
 * screens keep "acme/" and "web" whole (style.css lets the column shrink to its longest part).
 * @param {string} text
 */
function breakable(text) {
  return text.split(/(?<=[/\-_.])/).map((part, i) => (i ? [html`<wbr>`, part] : part));
}

/** @param {Run} run @param {AttemptInfo | undefined} attempt */
function attemptBadge(run, attempt) {
  if (!attempt || attempt.m < 2) return '';
  const group = hashLink(['runs'], { source: run.source, group: run.group_id ?? '' });
  const folded = attempt.earlier ? html` <span class="muted folded">(${attempt.earlier} earlier folded)</span>` : '';
  return html` <a class="badge attempt" href="${group}"
    title="All ${attempt.m} attempts of this retry group">attempt ${attempt.n} of ${attempt.m}</a>${folded}`;
}

/** @param {Run} run @param {boolean} [flash] @param {AttemptInfo} [attempt] */
export function runRow(run, flash = false, attempt = undefined) {
  const classes = ['run-row', run.status === 'blocked' ? 'is-blocked' : '', flash ? 'flash' : '']
    .filter(Boolean).join(' ');
  const asks = run.status === 'blocked' && run.question
    ? html`<span class="question-hint">Asks: ${run.question}</span>`
    : '';
  const failed = failureText(run.failure);
  const why = failed ? html`<span class="failure-hint">Failed for ${failed}</span>` : '';
  const pr = run.pr_url
    ? html` <a class="pr-link" href="${run.pr_url}" rel="noopener noreferrer"
      target="_blank">${prLabel(run.pr_url)}</a>`
    : '';
  return html`<tr class="${classes}" data-key="${runKey(run)}">
    <td data-label="Status" class="c-status">${statusBadge(run.status)}</td>
    <td data-label="Verdict" class="c-verdict">${verdictBadge(run.verdict)}</td>
    <td data-label="Run" class="brief"><a href="${runLink(run)}">${run.brief || run.run}</a>
      <span class="run-id mono">${run.run}</span>${attemptBadge(run, attempt)}${asks}${why}</td>
    <td data-label="Source" class="mono c-source"><a href="${hashLink(['runs'], { source: run.source })}"
      title="Only runs sent by ${run.source}">${breakable(run.source)}</a></td>
    <td data-label="Repo" class="mono c-repo">${run.repo
      ? html`<a href="${hashLink(['runs'], { repo: run.repo })}"
        title="Only runs of ${run.repo}">${breakable(run.repo)}</a>`
      : '—'}</td>
    <td data-label="Branch / PR" class="c-branch"><span class="mono"
      title="${run.branch ?? ''}">${run.branch ?? '—'}</span>${pr}</td>
    <td data-label="Origin · provider" class="c-via">${run.origin ?? '—'} · ${run.provider ?? '—'}</td>
    <td data-label="Started" class="nowrap c-started">${timeTag(run.started_at)}</td>
    <td data-label="Duration" class="num c-duration" data-run-status="${run.status}"
      data-started="${isTicking(run) ? run.started_at ?? '' : ''}">${runDuration(run)}</td>
    <td data-label="Cost" class="num c-cost${run.cost_usd == null ? ' unknown' : ''}">${money(run.cost_usd)}</td>
  </tr>`;
}

/** The table head matching runRow's cells. */
export function runHead() {
  return html`<thead><tr><th scope="col">Status</th><th scope="col">Verdict</th><th scope="col">Run</th>
    <th scope="col">Source</th><th scope="col">Repo</th><th scope="col">Branch / PR</th>
    <th scope="col">Origin · provider</th><th scope="col">Started</th><th scope="col" class="num">Duration</th>
    <th scope="col" class="num">Cost</th></tr></thead>`;
}
