// @ts-check
// <svc-diff-view>: what the agent changed — the file list with +/− from diffstat.json and the unified diff of
// diff.patch with line numbers, one collapsible block per file. Large files start collapsed and are rendered only
// when opened; binary files are named, not shown. The patch is untrusted text: it reaches the DOM only through the
// escaping template. Both files are fetched only when the run lists them (no 404 for runs without a diff).
import { html, render } from '../lib/html.js';
import { api } from '../lib/api.js';
import { inlineFailure } from '../lib/ui.js';
import { count } from '../lib/format.js';
import { parseDiff, lineCount } from '../lib/diff-parse.js';
import { artifactUrl, artifactsOf } from './artifact-list.js';

/** Files with more lines than this start collapsed. */
export const LARGE_FILE_LINES = 400;
/** Above this many lines in all, files off screen are laid out only when scrolled to. */
const BIG_DIFF_LINES = 1500;

/** @typedef {import('../lib/diff-parse.js').DiffFile} DiffFile */
/** @typedef {{path: string, insertions: number, deletions: number}} StatFile */

const MARK = /** @type {Record<string, string>} */ ({ add: '+', del: '−', note: '\\', context: ' ' });

/**
 * One numbered line: old number, new number, the text after its +/− mark.
 * @param {import('../lib/diff-parse.js').DiffLine} l
 */
function lineRow(l) {
  return html`<tr class="d-${l.kind}"><td class="ln">${l.old ?? ''}</td><td class="ln">${l.new ?? ''}</td>
    <td class="code">${MARK[l.kind] ?? ' '}${l.text}</td></tr>`;
}

/** @param {import('../lib/diff-parse.js').Hunk} h */
function hunkRows(h) {
  const header = html`<tr class="d-hunk"><td class="ln" aria-hidden="true"></td><td class="ln" aria-hidden="true"></td>
    <td class="code">${h.header}</td></tr>`;
  return html`${header}${h.lines.map(lineRow)}`;
}

/** @param {DiffFile} f */
function fileBody(f) {
  if (f.binary) {
    return html`<p class="muted diff-note">Binary file: its content is in <code>diff.patch</code>,
      not shown here.</p>`;
  }
  if (f.hunks.length === 0) return html`<p class="muted diff-note">No line changes (mode or name only).</p>`;
  return html`<div class="diff-scroll"><table class="diff"><tbody>${f.hunks.map(hunkRows)}</tbody></table></div>`;
}

/** "+12 −3" in green and red. @param {number} plus @param {number} minus */
function counts(plus, minus) {
  return html`<span class="plus">+${count(plus)}</span> <span class="minus">−${count(minus)}</span>`;
}

/** @param {DiffFile} f @param {number} i */
function fileBlock(f, i) {
  const large = lineCount(f) > LARGE_FILE_LINES;
  const open = !large && !f.binary;
  const renamed = f.oldPath && f.oldPath !== f.path ? html`${f.oldPath} → ` : '';
  const size = large ? 'yes' : 'no';
  return html`<details class="diff-file" data-file="${i}" data-large="${size}" ${open ? html`open` : ''}>
    <summary><span class="mono diff-path">${renamed}${f.path}</span>
      <span class="diff-counts">${counts(f.additions, f.deletions)}</span>
      ${f.status !== 'modified' ? html`<span class="badge file-${f.status}">${f.status}</span>` : ''}
      ${f.binary ? html`<span class="badge file-binary">binary</span>` : ''}
      ${large ? html`<span class="muted">large: ${count(lineCount(f))} lines, open to show</span>` : ''}</summary>
    <div class="diff-body">${open ? fileBody(f) : ''}</div>
  </details>`;
}

class DiffView extends HTMLElement {
  constructor() {
    super();
    /** @type {{source: string, run: string} | null} */
    this.runId = null;
    this.loadedKey = '';
    /** @type {DiffFile[]} */
    this.files = [];
  }

  connectedCallback() {
    render(this, html`<p class="muted">No diff recorded for this run yet.</p>`);
    // Collapsed files get their lines on first open, so a big diff costs nothing until someone looks.
    this.addEventListener('toggle', (event) => {
      const details = /** @type {HTMLDetailsElement} */ (event.target);
      if (!(details instanceof HTMLDetailsElement) || !details.open) return;
      if (!details.classList.contains('diff-file')) return;
      const body = /** @type {HTMLElement} */ (details.querySelector('.diff-body'));
      const file = this.files[Number(details.dataset.file)];
      if (file && body.childElementCount === 0) render(body, fileBody(file));
    }, true);
    this.addEventListener('click', (event) => {
      const target = event.target instanceof Element ? event.target : null;
      const jump = target?.closest('[data-jump]');
      if (jump) {
        const selector = `details[data-file="${Number(jump.getAttribute('data-jump'))}"]`;
        const details = /** @type {HTMLDetailsElement | null} */ (this.querySelector(selector));
        if (details) {
          details.open = true;
          details.scrollIntoView({ block: 'start' });
        }
      }
      const all = target?.closest('[data-expand]');
      if (!all) return;
      const open = all.getAttribute('data-expand') === 'open';
      for (const d of this.querySelectorAll('details.diff-file')) /** @type {HTMLDetailsElement} */ (d).open = open;
    });
  }

  /** @param {unknown} _run @param {any} body */
  update(_run, body) {
    if (!this.runId) return;
    const artifacts = artifactsOf(body);
    const patch = artifacts.find((a) => /(^|\/)diff\.patch$/.test(a.path));
    const stat = artifacts.find((a) => /(^|\/)diffstat\.json$/.test(a.path));
    const key = `${patch?.path ?? ''}:${patch?.sha256 ?? ''}:${stat?.path ?? ''}:${stat?.sha256 ?? ''}`;
    if (key === this.loadedKey) return;
    this.loadedKey = key;
    if (!patch && !stat) return;
    void this.load(patch?.path ?? null, stat?.path ?? null);
  }

  /** @param {string | null} patchPath @param {string | null} statPath */
  async load(patchPath, statPath) {
    const id = /** @type {{source: string, run: string}} */ (this.runId);
    render(this, html`<p class="muted">Loading the changes…</p>`);
    try {
      const [text, stat] = await Promise.all([
        patchPath
          ? api(artifactUrl(id, patchPath), { raw: true }).then((/** @type {Response} */ r) => r.text())
          : Promise.resolve(null),
        statPath ? api(artifactUrl(id, statPath)) : Promise.resolve(null),
      ]);
      this.show(text, stat, patchPath ? artifactUrl(id, patchPath) : null);
    } catch (err) {
      render(this, inlineFailure(err));
    }
  }

  /** @param {string | null} patch @param {any} stat @param {string | null} patchUrl */
  show(patch, stat, patchUrl) {
    const started = performance.now();
    this.files = patch === null ? [] : parseDiff(patch);
    const parsed = performance.now();
    const statFiles = statFilesOf(stat, this.files);
    const plus = statFiles.reduce((n, f) => n + f.insertions, 0);
    const minus = statFiles.reduce((n, f) => n + f.deletions, 0);
    const index = new Map(this.files.map((f, i) => [f.path, i]));
    const binary = new Set(this.files.filter((f) => f.binary).map((f) => f.path));
    const link = patchUrl
      ? html` · <a href="${patchUrl}" data-api-file="diff.patch" target="_blank" rel="noopener">diff.patch</a>`
      : '';
    const toggles = this.files.length > 1
      ? html`<p class="row"><button type="button" data-expand="open">Expand all</button>
          <button type="button" data-expand="close">Collapse all</button></p>`
      : '';
    /** @param {StatFile} f */
    const item = (f) => {
      const i = index.get(f.path);
      const name = i === undefined
        ? html`<span class="mono">${f.path}</span>`
        : html`<button type="button" class="link-button mono" data-jump="${i}">${f.path}</button>`;
      const share = barWidth(f.insertions, f.insertions + f.deletions);
      return html`<li>${name} ${counts(f.insertions, f.deletions)}
        ${binary.has(f.path) ? html`<span class="badge file-binary">binary</span>` : ''}
        <span class="diff-bar" aria-hidden="true"><span class="bar-plus" data-w="${share}"></span></span></li>`;
    };
    const note = patch === null
      ? html`<p class="muted">The run recorded no diff.patch, only the counts.</p>`
      : this.files.length === 0 ? html`<p class="muted">The patch is empty: nothing changed.</p>` : '';
    const changed = `${statFiles.length} file${statFiles.length === 1 ? '' : 's'} changed`;
    render(this, html`<div class="diff-summary">
        <p><strong>${changed}</strong>, ${counts(plus, minus)}${link}</p>
        ${toggles}
      </div>
      <ul class="diff-files">${statFiles.map(item)}</ul>
      ${note}
      ${this.files.map((f, i) => fileBlock(f, i))}`);
    // Only a big diff skips layout of off-screen files (content-visibility): a small one is laid out whole.
    this.classList.toggle('big-diff', this.files.reduce((n, f) => n + lineCount(f), 0) > BIG_DIFF_LINES);
    // Layout is part of the cost a person waits for: force it before taking the time.
    void this.offsetHeight;
    this.dataset.renderMs = String(Math.round(performance.now() - started));
    this.dataset.parseMs = String(Math.round(parsed - started));
    this.dataset.lines = String(this.files.reduce((n, f) => n + lineCount(f), 0));
  }
}

/**
 * The file list: diffstat.json's when the run has it, else counted from the patch.
 * @param {any} stat @param {DiffFile[]} files @returns {StatFile[]}
 */
function statFilesOf(stat, files) {
  if (!Array.isArray(stat?.files)) {
    return files.map((f) => ({ path: f.path, insertions: f.additions, deletions: f.deletions }));
  }
  return stat.files
    .filter((/** @type {any} */ f) => typeof f?.path === 'string')
    .map((/** @type {any} */ f) => ({
      path: f.path, insertions: Number(f.insertions) || 0, deletions: Number(f.deletions) || 0,
    }));
}

/**
 * Share of additions in tenths (0–10), for a CSS-classed bar (no style attributes under the CSP).
 * @param {number} plus @param {number} total
 */
function barWidth(plus, total) {
  return total > 0 ? String(Math.round((plus / total) * 10)) : '0';
}

export function registerDiffView() {
  if (!customElements.get('svc-diff-view')) customElements.define('svc-diff-view', DiffView);
}
