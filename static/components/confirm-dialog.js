// @ts-check
// <svc-confirm>: one modal confirmation for actions that change a run. confirmAction() resolves true when confirmed.
import { html, render } from '../lib/html.js';

class ConfirmDialog extends HTMLElement {
  connectedCallback() {
    render(
      this,
      html`<dialog class="dialog" aria-labelledby="confirm-title" aria-describedby="confirm-body">
        <form method="dialog" class="stack">
          <h2 id="confirm-title"></h2>
          <p id="confirm-body"></p>
          <div class="row end">
            <button type="submit" value="cancel">Cancel</button>
            <button type="submit" value="ok" class="primary" data-role="ok"></button>
          </div>
        </form>
      </dialog>`,
    );
  }

  /**
   * @param {{title: string, body: string, confirm: string, danger?: boolean}} text
   * @returns {Promise<boolean>}
   */
  ask(text) {
    const dialog = /** @type {HTMLDialogElement} */ (this.querySelector('dialog'));
    const ok = /** @type {HTMLButtonElement} */ (this.querySelector('[data-role=ok]'));
    /** @type {HTMLElement} */ (this.querySelector('#confirm-title')).textContent = text.title;
    /** @type {HTMLElement} */ (this.querySelector('#confirm-body')).textContent = text.body;
    ok.textContent = text.confirm;
    ok.classList.toggle('danger', Boolean(text.danger));
    dialog.returnValue = '';
    dialog.showModal();
    ok.focus();
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
    });
  }
}

/** @param {{title: string, body: string, confirm: string, danger?: boolean}} text */
export function confirmAction(text) {
  const element = /** @type {ConfirmDialog | null} */ (document.querySelector('svc-confirm'));
  return element ? element.ask(text) : Promise.resolve(false);
}

export function registerConfirm() {
  if (!customElements.get('svc-confirm')) customElements.define('svc-confirm', ConfirmDialog);
}
