// @ts-check
// <svc-start-page>: start a run (POST /v1/start) from a brief, a spec file or an error-tracker issue URL, and import
// runs already on disk (POST /v1/import). A request id makes a double submit start one run, not two.
import { html, render } from '../lib/html.js';
import { api, itemsOf } from '../lib/api.js';
import { runLink } from '../lib/route.js';
import { refusedNotice } from '../lib/ui.js';

class StartPage extends HTMLElement {
  connectedCallback() {
    this.requestId = crypto.randomUUID();
    render(this, html`<div class="page-head"><h1>Start a run</h1><p class="muted">The agent works in an isolated
      worktree; a pull request opens only when the project policy allows it. Needs a Control Plane bound to this
      machine.</p></div>
      <form class="panel stack start-form" data-role="start">
        <fieldset class="kinds"><legend>What should the agent work from?</legend>
          <label class="check"><input type="radio" name="kind" value="brief" checked> A brief</label>
          <label class="check"><input type="radio" name="kind" value="spec_path"> A spec file</label>
          <label class="check"><input type="radio" name="kind" value="issue_url"> An error-tracker issue URL</label>
        </fieldset>
        <label for="st-input" data-role="input-label">Brief</label>
        <textarea id="st-input" name="input" rows="3" required
          placeholder="One line: what should change and why"></textarea>
        <div class="grid-2">
          <div class="field"><label for="st-repo">Repository path</label>
            <input id="st-repo" name="repo" list="st-repos" required placeholder="/home/me/src/api" autocomplete="off"
              spellcheck="false"><datalist id="st-repos"></datalist></div>
          <div class="field"><label for="st-provider">Provider</label><select id="st-provider"
            name="provider"><option value="">Default</option></select></div>
        </div>
        <label class="check"><input type="checkbox" name="pr" checked>
          Open a pull request when the policy allows</label>
        <div class="row"><button type="submit" class="primary">Start run</button></div>
        <div data-role="start-message" aria-live="polite"></div>
      </form>
      <form class="panel stack" data-role="import">
        <h2>Import a project</h2>
        <p class="muted">Registers the project, so runs can be started in it, and reads
          <code>&lt;path&gt;/.svc/runs/*</code> into this Control Plane.</p>
        <label for="im-path">Project path</label>
        <input id="im-path" name="path" required placeholder="/home/me/src/api" autocomplete="off" spellcheck="false">
        <div class="row"><button type="submit">Import</button></div>
        <div data-role="import-message" aria-live="polite"></div>
      </form>`);
    this.addEventListener('change', (event) => {
      const t = /** @type {HTMLInputElement} */ (event.target);
      if (t.name === 'kind') this.setKind(t.value);
    });
    this.addEventListener('input', () => {
      // A changed form is a different request: a fresh id keeps the old one's idempotency from swallowing it.
      this.requestId = crypto.randomUUID();
    });
    this.addEventListener('submit', (event) => {
      event.preventDefault();
      const form = /** @type {HTMLFormElement} */ (event.target);
      void (form.dataset.role === 'start' ? this.start(form) : this.importRuns(form));
    });
    void this.fillChoices();
  }

  /** @param {string} kind */
  setKind(kind) {
    const label = /** @type {HTMLElement} */ (this.querySelector('[data-role=input-label]'));
    const input = /** @type {HTMLTextAreaElement} */ (this.querySelector('#st-input'));
    label.textContent = kind === 'brief'
      ? 'Brief'
      : kind === 'spec_path' ? 'Spec file (absolute path to a .md file)' : 'Issue URL';
    input.placeholder = kind === 'brief'
      ? 'One line: what should change and why'
      : kind === 'spec_path' ? '/home/me/src/api/specs/fix-login.md' : 'https://…/issues/12345/';
    input.rows = kind === 'brief' ? 3 : 1;
  }

  async fillChoices() {
    try {
      const providers = itemsOf(await api('/v1/providers'), 'providers');
      const select = /** @type {HTMLSelectElement} */ (this.querySelector('#st-provider'));
      render(select, html`<option value="">Default</option>${providers.map((p) => {
        const missing = p.available === false;
        const label = missing ? `${p.name} (not installed)` : p.name;
        return html`<option value="${p.name}" ${missing ? html`disabled` : ''}>${label}</option>`;
      })}`);
    } catch {
      // The default provider still works.
    }
    try {
      // Runs start only in registered projects (imported below, or the "repos" setting).
      const projects = itemsOf(await api('/v1/projects'), 'projects');
      const list = /** @type {HTMLElement} */ (this.querySelector('#st-repos'));
      render(list, html`${projects.map((p) => html`<option value="${p.path}"></option>`)}`);
    } catch {
      // Free text still works.
    }
  }

  /** @param {HTMLFormElement} form */
  async start(form) {
    const data = new FormData(form);
    const kind = String(data.get('kind') ?? 'brief');
    const message = /** @type {HTMLElement} */ (this.querySelector('[data-role=start-message]'));
    /** @type {Record<string, unknown>} */
    const body = {
      [kind]: String(data.get('input') ?? '').trim(),
      repo: String(data.get('repo') ?? '').trim(),
      pr: data.get('pr') === 'on',
      request_id: this.requestId,
    };
    if (data.get('provider')) body.provider = String(data.get('provider'));
    const button = /** @type {HTMLButtonElement} */ (form.querySelector('button[type=submit]'));
    button.disabled = true;
    try {
      const run = await api('/v1/start', { method: 'POST', body });
      render(message, html`<p class="notice ok" role="status">Started <a href="${runLink(run)}">${run.run}</a>.</p>`);
      location.hash = runLink(run);
    } catch (err) {
      render(message, refusedNotice('Not started.', err));
    } finally {
      button.disabled = false;
    }
  }

  /** @param {HTMLFormElement} form */
  async importRuns(form) {
    const message = /** @type {HTMLElement} */ (this.querySelector('[data-role=import-message]'));
    try {
      const path = String(new FormData(form).get('path') ?? '').trim();
      const result = await api('/v1/import', { method: 'POST', body: { path } });
      render(message, html`<p class="notice ok" role="status">Imported ${result?.runs ?? 0}
        run${result?.runs === 1 ? '' : 's'} and ${result?.events ?? 0} events. <a href="#/runs">See runs</a></p>`);
    } catch (err) {
      render(message, refusedNotice('Not imported.', err));
    }
  }
}

export function registerStartPage() {
  if (!customElements.get('svc-start-page')) customElements.define('svc-start-page', StartPage);
}
