// @ts-check
// <svc-token-dialog>: asks for the Control Plane token once, checks it against the server before keeping it
// (in sessionStorage, so it is gone when the tab closes), and says plainly when a token is wrong.
import { html, render } from '../lib/html.js';
import { setToken } from '../lib/api.js';

class TokenDialog extends HTMLElement {
  connectedCallback() {
    render(
      this,
      html`<dialog class="dialog" aria-labelledby="token-title">
        <form method="dialog" class="stack">
          <h2 id="token-title">This Control Plane needs a token</h2>
          <p class="muted" data-role="lead">Enter the value of <code>SVC_CONTROL_TOKEN</code> the server was started
            with. It is kept in this tab only (sessionStorage).</p>
          <label for="token-input">Token</label>
          <input id="token-input" name="token" type="password" autocomplete="off" spellcheck="false" required>
          <p class="field-error" data-role="error" role="alert" hidden></p>
          <div class="row end">
            <button type="button" data-role="cancel">Cancel</button>
            <button type="submit" class="primary">Use token</button>
          </div>
        </form>
      </dialog>`,
    );
  }

  /**
   * Shows the prompt; resolves true once a token the server accepts is stored, false on cancel.
   * @param {boolean} rejected a stored token was just refused
   * @returns {Promise<boolean>}
   */
  ask(rejected) {
    const dialog = /** @type {HTMLDialogElement} */ (this.querySelector('dialog'));
    const form = /** @type {HTMLFormElement} */ (this.querySelector('form'));
    const input = /** @type {HTMLInputElement} */ (this.querySelector('input'));
    const error = /** @type {HTMLElement} */ (this.querySelector('[data-role=error]'));
    const cancel = /** @type {HTMLButtonElement} */ (this.querySelector('[data-role=cancel]'));
    /** @param {string} text */
    const showError = (text) => {
      error.textContent = text;
      error.hidden = text === '';
      input.setAttribute('aria-invalid', text ? 'true' : 'false');
    };
    if (rejected) setToken('');
    showError(rejected ? 'The saved token was not accepted: the server’s token may have changed.' : '');
    input.value = '';
    dialog.showModal();
    input.focus();
    return new Promise((resolve) => {
      /** @param {boolean} ok */
      const finish = (ok) => {
        form.removeEventListener('submit', onSubmit);
        cancel.removeEventListener('click', onCancel);
        dialog.removeEventListener('cancel', onCancel);
        dialog.close();
        if (ok) window.dispatchEvent(new Event('svc:token'));
        resolve(ok);
      };
      /** @param {Event} event */
      const onSubmit = async (event) => {
        event.preventDefault();
        const candidate = input.value.trim();
        if (!candidate) return showError('Enter the token.');
        showError('');
        const headers = { authorization: `Bearer ${candidate}` };
        const response = await fetch('/v1/runs?limit=1', { headers, cache: 'no-store' }).catch(() => null);
        if (response && response.status === 401) {
          showError('That token is wrong: the server refused it. Check SVC_CONTROL_TOKEN and try again.');
          input.select();
          return;
        }
        setToken(candidate);
        finish(true);
      };
      /** @param {Event} event */
      const onCancel = (event) => {
        event.preventDefault();
        finish(false);
      };
      form.addEventListener('submit', onSubmit);
      cancel.addEventListener('click', onCancel);
      dialog.addEventListener('cancel', onCancel);
    });
  }
}

export function registerTokenDialog() {
  if (!customElements.get('svc-token-dialog')) customElements.define('svc-token-dialog', TokenDialog);
}
