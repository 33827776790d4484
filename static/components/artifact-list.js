// @ts-check
// <svc-artifact-list>: the files recorded for a run, as links. With a token set, links are fetched with it
// (lib/download.js) because a plain link cannot carry the Authorization header.
import { html, render } from '../lib/html.js';
import { runPath } from '../lib/api.js';
import { bytes } from '../lib/format.js';

/** @typedef {{path: string, content_type?: string, size?: number, sha256?: string}} Artifact */

/**
 * URL of one artifact: each path segment encoded on its own.
 * @param {{source: string, run: string}} id @param {string} path
 */
export function artifactUrl(id, path) {
  return `${runPath(id)}/artifact/${path.split('/').map(encodeURIComponent).join('/')}`;
}

/** Artifacts from a run detail answer, whichever key it uses. @param {any} body @returns {Artifact[]} */
export function artifactsOf(body) {
  const list = body?.artifacts ?? body?.run?.artifacts ?? [];
  if (!Array.isArray(list)) return [];
  return list.map((a) => (typeof a === 'string' ? { path: a } : a)).filter((a) => typeof a?.path === 'string');
}

class ArtifactList extends HTMLElement {
  constructor() {
    super();
    /** @type {{source: string, run: string} | null} */
    this.runId = null;
    this.rendered = '';
  }

  /** @param {any} _run @param {any} body */
  update(_run, body) {
    if (!this.runId) return;
    const artifacts = artifactsOf(body);
    const key = JSON.stringify(artifacts);
    if (key === this.rendered) return;
    this.rendered = key;
    const id = this.runId;
    render(this, artifacts.length === 0
      ? html`<p class="muted">No artifacts recorded yet.</p>`
      : html`<ul class="artifacts">${artifacts.map((a) => html`<li>
          <a href="${artifactUrl(id, a.path)}" data-api-file="${a.path.split('/').pop() ?? 'artifact'}" target="_blank"
            rel="noopener">${a.path}</a>
          <span class="muted">${a.content_type ?? ''}${a.size != null ? ` · ${bytes(a.size)}` : ''}</span>
        </li>`)}</ul>`);
  }
}

export function registerArtifactList() {
  if (!customElements.get('svc-artifact-list')) customElements.define('svc-artifact-list', ArtifactList);
}
