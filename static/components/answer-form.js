// @ts-check
// <svc-answer-form>: shown only while the run is blocked — the agent's question and a form to answer it.
import { html, render } from '../lib/html.js';
import { api, runPath } from '../lib/api.js';
import { explain } from '../lib/ui.js';

class AnswerForm extends HTMLElement {
  constructor() {
    super();
    /** @type {{source: string, run: string} | null} */
    this.runId = null;
    this.shownFor = '';
    this.answered = false;
  }

  connectedCallback() {
    this.addEventListener('submit', (event) => void this.submit(event));
  }

  /** @param {{status: string, question?: string | null}} run */
  update(run) {
    const key = run.status === 'blocked' ? `blocked:${run.question ?? ''}` : '';
    if (key === this.shownFor) return;
    this.shownFor = key;
    if (!key) {
      render(this, this.answered ? html`<p class="notice ok" role="status">Answer delivered; the run is ${run.status} again.</p>` : html``);
      this.answered = false;
      return;
    }
    render(this, html`<section class="question" aria-labelledby="question-title">
      <h2 id="question-title">The agent is waiting for an answer</h2>
      <blockquote class="question-text">${run.question || 'The run is blocked without a question text.'}</blockquote>
      <form class="stack" data-role="answer">
        <label for="answer-text">Your answer</label>
        <textarea id="answer-text" name="answer" rows="3" required placeholder="Answer in plain words; the agent continues with it."></textarea>
        <div class="row"><button type="submit" class="primary">Send answer</button><span class="muted">Ctrl+Enter sends</span></div>
        <div data-role="answer-message" aria-live="polite"></div>
      </form>
    </section>`);
    const textarea = /** @type {HTMLTextAreaElement} */ (this.querySelector('textarea'));
    textarea.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) /** @type {HTMLFormElement} */ (textarea.form).requestSubmit();
    });
  }

  /** @param {Event} event */
  async submit(event) {
    event.preventDefault();
    if (!this.runId) return;
    const form = /** @type {HTMLFormElement} */ (event.target);
    const message = /** @type {HTMLElement} */ (form.querySelector('[data-role=answer-message]'));
    const answer = String(new FormData(form).get('answer') ?? '').trim();
    if (!answer) {
      render(message, html`<p class="field-error" role="alert">Write an answer first.</p>`);
      return;
    }
    const button = /** @type {HTMLButtonElement} */ (form.querySelector('button[type=submit]'));
    button.disabled = true;
    try {
      await api(`${runPath(this.runId)}/answer`, { method: 'POST', body: { answer } });
      this.answered = true;
      render(message, html`<p class="notice ok" role="status">Answer sent. The run continues.</p>`);
      this.dispatchEvent(new CustomEvent('svc:run-changed', { bubbles: true }));
    } catch (err) {
      const e = /** @type {{code?: string, message?: string}} */ (err);
      render(message, html`<div class="notice error" role="alert"><strong>Answer refused.</strong> ${explain(e.code)} <span class="muted">${e.message ?? ''}</span> <code>${e.code ?? ''}</code></div>`);
      button.disabled = false;
    }
  }
}

export function registerAnswerForm() {
  if (!customElements.get('svc-answer-form')) customElements.define('svc-answer-form', AnswerForm);
}
