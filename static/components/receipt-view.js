// @ts-check
// <svc-receipt-view>: the run's Evidence Receipt (artifact receipt.json) rendered for people: verdict, checks,
// diff, cost, integrity and signature, with the raw JSON one click away.
import { html, render } from '../lib/html.js';
import { api } from '../lib/api.js';
import { verdictBadge, inlineFailure } from '../lib/ui.js';
import { money, count } from '../lib/format.js';
import { duration, timeTag } from '../lib/time.js';
import { artifactUrl, artifactsOf } from './artifact-list.js';

/** @param {unknown} v */
const text = (v) => (v === null || v === undefined || v === ''
  ? '—'
  : typeof v === 'object' ? JSON.stringify(v) : String(v));
/** @param {unknown} v */
const short = (v) => (typeof v === 'string' && /^[0-9a-f]{16,}$/i.test(v) ? v.slice(0, 12) : text(v));

/**
 * The agent's network as the receipt records it: confined to the egress gate, with the hosts it reached and
 * what it was refused, or plainly not confined. Every connection is in the run's egress.jsonl artifact.
 * @param {any} n
 */
function networkTable(n) {
  if (!n || typeof n.confined !== 'boolean') return '';
  if (!n.confined) {
    return html`<p class="notice"><strong>Network not confined:</strong> the run had no sandbox, so the agent could
      reach any host.</p>`;
  }
  /** @type {any[]} */
  const hosts = Array.isArray(n.hosts) ? n.hosts : [];
  /** @type {any[]} */
  const denials = Array.isArray(n.denials) ? n.denials : [];
  const rows = [
    ...hosts.map((h) => html`<tr><td class="mono">${text(h.host)}:${text(h.port)}</td><td>allowed</td>
      <td class="num">${count(h.connections)}</td><td class="num">${count(h.bytes_up)} / ${count(h.bytes_down)}</td>
      <td></td></tr>`),
    ...denials.map((d) => html`<tr><td class="mono">${text(d.host)}:${text(d.port)}</td>
      <td><span class="badge verdict-not_verified">denied</span></td><td class="num">${count(d.count)}</td><td></td>
      <td>${text(d.reason)}</td></tr>`),
  ];
  return html`<table class="compact network">
    <caption>Network (through the egress gate: ${count(n.connections)} connections, ${count(n.denied)} denied)</caption>
    <thead><tr><th scope="col">Destination</th><th scope="col">Decision</th><th scope="col" class="num">Connections</th>
      <th scope="col" class="num">Bytes up / down</th><th scope="col">Reason</th></tr></thead>
    <tbody>${rows.length
      ? rows
      : html`<tr><td colspan="5" class="muted">No connection was attempted.</td></tr>`}</tbody></table>`;
}

/**
 * The sha256 of the fetched receipt bytes; where the page has no Web Crypto (plain http away from localhost), the
 * server's own hash of the bytes it sent (the artifact's ETag).
 * @param {ArrayBuffer} bytes @param {Response} response
 */
async function sha256Of(bytes, response) {
  if (!globalThis.crypto?.subtle) return (response.headers.get('etag') ?? '').replace(/^(W\/)?"|"$/g, '');
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

class ReceiptView extends HTMLElement {
  constructor() {
    super();
    /** @type {{source: string, run: string} | null} */
    this.runId = null;
    this.loadedKey = '';
  }

  connectedCallback() {
    render(this, html`<p class="muted">No receipt yet: it is written when the run finishes its checks.</p>`);
  }

  /** @param {{verdict?: string|null, updated_at?: string|null}} run @param {any} body */
  update(run, body) {
    if (!this.runId) return;
    // The receipt is receipt.json itself, the file the server checked (`receipt_check`): never another path.
    const found = artifactsOf(body).find((a) => a.path === 'receipt.json');
    // Fetch only a receipt the run lists: guessing the path is a 404 for runs that have none.
    if (!found) {
      if (run.verdict) render(this, html`<p class="muted">No receipt recorded for this run.</p>`);
      return;
    }
    /**
     * @type {{signed_by?: {kid?: string, name?: string} | null, problem?: string | null, unknown_kid?: string | null,
     *   sha256?: string | null} | null}
     */
    const check = body?.receipt_check ?? null;
    const key = `${run.verdict ?? ''}:${found.sha256 ?? ''}:${JSON.stringify(check)}`;
    if (key === this.loadedKey) return;
    this.loadedKey = key;
    void this.load(found.path, check ?? { problem: 'the server did not check it' });
  }

  /**
   * Shows the receipt as signed only when the bytes fetched are the ones the server checked (`receipt_check.sha256`):
   * the file may be replaced between the two requests.
   * @param {string} path
   * @param {{signed_by?: {kid?: string, name?: string} | null, problem?: string | null, unknown_kid?: string | null,
   *   sha256?: string | null}} check
   */
  async load(path, check) {
    const url = artifactUrl(/** @type {{source: string, run: string}} */ (this.runId), path);
    try {
      /** @type {Response} */
      const response = await api(url, { raw: true });
      const bytes = await response.arrayBuffer();
      const body = JSON.parse(new TextDecoder().decode(bytes));
      const same = check.sha256 != null && (await sha256Of(bytes, response)) === check.sha256;
      if (check.signed_by && same) this.show(body, url, path, check.signed_by);
      else if (check.signed_by) this.showUnsigned(body, url, path, 'it changed after the server checked it', null);
      else if (check.unknown_kid && !same) {
        this.showUnsigned(body, url, path, 'it changed after the server checked it', null);
      } else {
        const problem = check.problem ?? 'the server did not check it';
        this.showUnsigned(body, url, path, problem, check.unknown_kid ?? null);
      }
    } catch (err) {
      const code = /** @type {{code?: string}} */ (err).code;
      if (code === 'not_found') render(this, html`<p class="muted">No receipt recorded for this run.</p>`);
      else render(this, inlineFailure(err));
    }
  }

  /**
   * A receipt.json whose signature does not verify with a key the Control Plane knows: whoever shipped the run wrote
   * it (a pod's run container, where the agent runs, can), so none of its claims is shown as the receipt's. An intact
   * one naming a key this Control Plane does not have (a laptop's, another machine's import) says how to register it.
   * @param {any} r @param {string} url @param {string} path @param {string} problem @param {string | null} unknownKid
   */
  showUnsigned(r, url, path, problem, unknownKid) {
    const head = unknownKid
      ? html`<p class="notice"><strong class="warn">Signed by key <code>${unknownKid}</code>, which this Control Plane
        does not know:</strong> its signature cannot be checked here, so its verdict, checks and cost are not shown.
        To trust that signer, copy its public key (<code>~/.svc/keys/receipt-ed25519.pub.pem</code> on its machine)
        to <code>~/.svc/keys/trusted/&lt;name&gt;.pem</code> here (docs/control-config.md, <code>GET /v1/keys</code>).
        </p>`
      : html`<p class="notice"><strong class="warn">Not a signed receipt:</strong> this run's receipt.json does not
        verify with a key this Control Plane knows (${problem}), so its verdict, checks and cost are not shown.</p>`;
    render(this, html`<div class="receipt">
      ${head}
      ${this.rawAndDownload(r, url, path)}
    </div>`);
  }

  /** @param {any} r @param {string} url @param {string} path */
  rawAndDownload(r, url, path) {
    return html`<details><summary>Raw receipt JSON</summary><pre class="code">${JSON.stringify(r, null, 2)}</pre>
      </details>
      <p><a href="${url}" data-api-file="${path.split('/').pop() ?? 'receipt.json'}" target="_blank"
        rel="noopener">Download receipt.json</a></p>`;
  }

  /** @param {any} r @param {string} url @param {string} path @param {{kid?: string, name?: string}} signer */
  show(r, url, path, signer) {
    /** @type {any[]} */
    const checks = Array.isArray(r?.checks) ? r.checks : [];
    const diff = r?.diff ?? r?.diff_stats ?? {};
    const exact = /** @type {const} */ ({ mode: 'absolute', seconds: true });
    /** @type {unknown[]} */
    const gaps = Array.isArray(r?.gaps) ? r.gaps : [];
    /** @type {unknown[]} */
    const paths = Array.isArray(diff.paths) ? diff.paths : [];
    render(this, html`<div class="receipt">
      <div class="receipt-head">${verdictBadge(r?.verdict)}
        <span>Signed by key <code>${text(signer.kid)}</code> (${text(signer.name)})</span>
        <span class="muted">Check it offline: <code>svc receipt verify receipt.json</code></span>
      </div>
      <dl class="facts">
        <div><dt>Run</dt><dd class="mono">${text(r?.run?.source ?? r?.source)}/${text(
          r?.run?.run ?? r?.run_id ?? r?.run)}</dd></div>
        <div><dt>Repo</dt><dd class="mono">${text(r?.repo?.name ?? r?.repo)}</dd></div>
        <div><dt>Base → head</dt><dd class="mono">${short(r?.base_sha ?? r?.git?.base)} →
          ${short(r?.head_sha ?? r?.git?.head)}</dd></div>
        <div><dt>Provider</dt><dd>${text(r?.provider?.name ?? r?.provider)}</dd></div>
        <div><dt>Spec sha256</dt><dd class="mono">${short(r?.spec_sha256)}</dd></div>
        <div><dt>Diff</dt><dd>${count(diff.files ?? diff.files_changed)} files, +${count(
          diff.insertions ?? diff.additions)} −${count(diff.deletions)}</dd></div>
        <div><dt>Patch sha256</dt><dd class="mono">${short(diff.patch_sha256 ?? r?.patch_sha256)}</dd></div>
        <div><dt>${r?.cost?.source === 'metered' ? 'Cost (metered)' : 'Cost'}</dt>
          <dd>${money(r?.cost?.usd ?? r?.cost_usd ?? null)}${r?.cost?.source === 'metered'
            ? html` <span class="muted">(the agent reported ${money(r?.cost?.reported?.cost_usd ?? null)})</span>`
            : ''}</dd></div>
        <div><dt>Started / ended</dt><dd>${timeTag(r?.started_at ?? r?.times?.started_at, exact)} –
          ${timeTag(r?.ended_at ?? r?.times?.ended_at, exact)}</dd></div>
        <div><dt>Issued</dt><dd>${timeTag(r?.issued_at, exact)}</dd></div>
        <div><dt>Integrity</dt><dd class="mono">${short(r?.integrity)}</dd></div>
      </dl>
      ${gaps.length ? html`<div class="notice gaps"><strong>Gaps:</strong>
        <ul>${gaps.map((g) => html`<li>${text(g)}</li>`)}</ul></div>` : ''}
      ${paths.length ? html`<details><summary>${paths.length} changed path${paths.length === 1 ? '' : 's'}</summary>
        <ul class="mono files">${paths.map((p) => html`<li>${text(p)}</li>`)}</ul></details>` : ''}
      ${checks.length === 0 ? html`<p class="muted">No checks were configured.</p>` : html`<table class="compact">
        <caption>Checks</caption>
        <thead><tr><th scope="col">Check</th><th scope="col">Command</th><th scope="col">Result</th>
          <th scope="col" class="num">Time</th></tr></thead>
        <tbody>${checks.map((c) => html`<tr>
          <td>${text(c.name)}${c.required === false ? html` <span class="muted">(optional)</span>` : ''}</td>
          <td class="mono">${Array.isArray(c.argv ?? c.run) ? (c.argv ?? c.run).join(' ') : text(c.argv ?? c.run)}</td>
          <td>${c.exit_code === 0
            ? html`<span class="badge verdict-verified">passed</span>`
            : html`<span class="badge verdict-not_verified">exit ${text(c.exit_code)}</span>`}</td>
          <td class="num">${duration(c.duration_ms)}</td></tr>`)}</tbody></table>`}
      ${networkTable(r?.network)}
      ${this.rawAndDownload(r, url, path)}
    </div>`);
  }
}

export function registerReceiptView() {
  if (!customElements.get('svc-receipt-view')) customElements.define('svc-receipt-view', ReceiptView);
}
