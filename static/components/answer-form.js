// @ts-check
// <svc-answer-form>: while the run is blocked, the agent's question and a form to answer it — or, once an answer
// was sent and the run has not picked it up yet (pending_answer in run detail), that answer and what it waits for.
// A run another machine sent in gets the answer only at its runner's next check-in, so the form is not offered again.
import { html, render } from '../lib/html.js';
import { api, runPath } from '../lib/api.js';
import { reasonFirst } from '../lib/ui.js';
import { timeTag } from '../lib/time.js';
import { TERMINAL } from '../lib/run-status.js';

/** @typedef {{answer: string, answered_at: string, via: string, delivered_at: string | null}} PendingAnswer */

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

  /** @param {{status: string, question?: string | null, pending_answer?: PendingAnswer | null}} run */
  update(run) {
    const pending = run.pending_answer ?? null;
    // Outside blocked the key is the status, so the "picked up" bar is redrawn (and dropped) when the run moves on.
    const key = run.status === 'blocked' ? `blocked:${run.question ?? ''}:${JSON.stringify(pending)}` : run.status;
    if (key === this.shownFor) return;
    this.shownFor = key;
    if (run.status !== 'blocked') {
      // The bar tells that the answer reached the run, while the run goes on with it; once it ended it says nothing.
      const done = html`<p class="notice ok" role="status">The run picked up the answer; it is ${run.status} now.</p>`;
      render(this, this.answered && !TERMINAL.has(run.status) ? done : html``);
      this.answered = false;
      return;
    }
    if (pending) {
      this.answered = true;
      render(this, this.pendingView(run.question ?? '', pending));
      return;
    }
    render(this, html`<section class="question" aria-labelledby="question-title">
      <h2 id="question-title">The agent is waiting for an answer</h2>
      <blockquote class="question-text">${run.question || 'The run is blocked without a question text.'}</blockquote>
      <form class="stack" data-role="answer">
        <label for="answer-text">Your answer</label>
        <textarea id="answer-text" name="answer" rows="3" required
          placeholder="Answer in plain words; the agent continues with it."></textarea>
        <div class="row"><button type="submit" class="primary">Send answer</button>
          <span class="muted">Ctrl+Enter sends</span></div>
        <div data-role="answer-message" aria-live="polite"></div>
      </form>
    </section>`);
    const textarea = /** @type {HTMLTextAreaElement} */ (this.querySelector('textarea'));
    textarea.addEventListener('keydown', (e) => {
      if (e.key !== 'Enter' || !(e.ctrlKey || e.metaKey)) return;
      /** @type {HTMLFormElement} */ (textarea.form).requestSubmit();
    });
  }

  /** @param {string} question @param {PendingAnswer} p */
  pendingView(question, p) {
    const waiting = p.via === 'ingest' && !p.delivered_at;
    const delivered = p.delivered_at ? 'yes' : 'no';
    const at = (/** @type {string | null} */ t) => timeTag(t, { mode: 'absolute', seconds: true });
    const where = waiting
      ? html`The run's runner reports to this Control Plane from elsewhere: it receives the answer at its
        <strong>next check-in</strong>, and the run continues after that. There is no need to answer again.`
      : p.via === 'ingest'
        ? html`The runner collected the answer at ${at(p.delivered_at)}; the run continues as soon as it reads it.`
        : html`The answer is in the run's answer folder; the run continues as soon as it reads it (within seconds).`;
    return html`<section class="question answer-pending-box" aria-labelledby="question-title"
        data-role="pending-answer" data-delivered="${delivered}">
      <h2 id="question-title">Answer sent, not yet picked up by the run</h2>
      <blockquote class="question-text">${question || 'The run is blocked without a question text.'}</blockquote>
      <p><strong>Your answer</strong> (${at(p.answered_at)}):</p>
      <blockquote class="answer-text">${p.answer}</blockquote>
      <p class="notice pending" role="status">${where}</p>
    </section>`;
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
      render(message, html`<p class="notice pending" role="status">Answer recorded; checking the run…</p>`);
      this.dispatchEvent(new CustomEvent('svc:run-changed', { bubbles: true }));
    } catch (err) {
      render(message, reasonFirst('Answer refused', err));
      button.disabled = false;
    }
  }
}

export function registerAnswerForm() {
  if (!customElements.get('svc-answer-form')) customElements.define('svc-answer-form', AnswerForm);
}
