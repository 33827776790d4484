// @ts-check
// <svc-event-log>: a run's events — history from GET …/events, then live from …/stream after the last id seen.
// Lines are appended as DOM nodes with textContent (fast, and data never becomes markup).
import { html, render } from '../lib/html.js';
import { api, runPath, query, itemsOf } from '../lib/api.js';
import { openStream } from '../lib/sse.js';
import { showStreamState } from '../lib/live.js';
import { failure } from '../lib/ui.js';
import { clock, day, toMs, hoverText, zoneName } from '../lib/time.js';
import { eventText, eventData, logTag } from '../lib/event-text.js';

const MAX_LINES = 5000;
const HISTORY_PAGE = 500;
const HISTORY_PAGES = 40;

class EventLog extends HTMLElement {
  constructor() {
    super();
    /** @type {{source: string, run: string} | null} */
    this.runId = null;
    /** @type {(ReturnType<typeof openStream>) | null} */
    this.stream = null;
    this.lastId = 0;
    this.lines = 0;
    /** The local day of the last line shown: a line on a new day shows its date. */
    this.lastDay = '';
  }

  connectedCallback() {
    render(this, html`<div class="log-tools">
        <label class="check"><input type="checkbox" data-role="follow" checked> Follow</label>
        <label class="check"><input type="checkbox" data-role="logs" checked> Show log output</label>
        <span class="muted" data-role="count" aria-live="off"></span>
      </div>
      <ol class="log" data-role="log" tabindex="0" aria-label="Run events"></ol>`);
    this.querySelector('[data-role=logs]')?.addEventListener('change', (e) => {
      this.classList.toggle('hide-logs', !(/** @type {HTMLInputElement} */ (e.target).checked));
    });
    queueMicrotask(() => void this.start());
  }

  disconnectedCallback() {
    this.stream?.();
    this.stream = null;
    showStreamState('closed');
  }

  get log() {
    return /** @type {HTMLOListElement} */ (this.querySelector('[data-role=log]'));
  }

  async start() {
    if (!this.runId || this.stream) return;
    try {
      await this.loadHistory();
    } catch (err) {
      const box = document.createElement('div');
      render(box, failure(err, false));
      this.prepend(box);
    }
    if (!this.isConnected) return;
    this.stream = openStream(`${runPath(this.runId)}/stream`, {
      after: this.lastId,
      onEvent: (e) => this.add(e.id, e.kind, e.data),
      onState: (s) => {
        showStreamState(s);
        this.dataset.state = s;
      },
    });
    if (this.lines === 0) this.placeholder();
  }

  async loadHistory() {
    const id = /** @type {{source: string, run: string}} */ (this.runId);
    for (let page = 0; page < HISTORY_PAGES; page++) {
      const body = await api(`${runPath(id)}/events${query({ after: this.lastId, limit: HISTORY_PAGE })}`);
      const items = itemsOf(body, 'events').slice().sort((/** @type {any} */ a, /** @type {any} */ b) => a.id - b.id);
      for (const e of items) this.add(e.id, e.kind, e, false);
      if (items.length < HISTORY_PAGE) break;
    }
    this.scrollToEnd();
  }

  placeholder() {
    const li = document.createElement('li');
    li.className = 'log-empty muted';
    li.textContent = 'No events yet. They appear here as the run reports them.';
    this.log.append(li);
  }

  /** @param {number} id @param {string} kind @param {any} payload @param {boolean} [live] */
  add(id, kind, payload, live = true) {
    if (!(id > this.lastId)) return;
    this.lastId = id;
    const data = eventData(payload);
    this.log.querySelector('.log-empty')?.remove();
    const li = document.createElement('li');
    const stderr = kind === 'log' && data?.stream === 'stderr' ? ' stderr' : '';
    li.className = `ev ev-${kind.replace(/[^a-z]/g, '-')}${stderr}`;
    li.dataset.id = String(id);
    const time = document.createElement('time');
    const ms = toMs(payload?.ts ?? data?.ts);
    if (ms !== null) {
      // Lines show the clock; the day is a separator line wherever it changes (the first line starts one).
      const today = day(ms);
      if (today !== this.lastDay) {
        const sep = document.createElement('li');
        sep.className = 'log-day';
        sep.textContent = `${today} (${zoneName(ms)})`;
        this.log.append(sep);
      }
      time.textContent = clock(ms);
      this.lastDay = today;
      time.dateTime = new Date(ms).toISOString();
      time.title = hoverText(ms);
    }
    const tag = document.createElement('span');
    tag.className = 'ev-kind';
    tag.textContent = kind === 'log' ? logTag(data) : kind;
    const text = document.createElement('span');
    text.className = 'ev-text';
    text.textContent = eventText(kind, data);
    li.append(time, tag, text);
    this.log.append(li);
    this.dispatchEvent(new CustomEvent('svc:event', { bubbles: true, detail: { id, kind, data, ts: ms } }));
    if (++this.lines > MAX_LINES) {
      this.log.querySelector('li[data-id]')?.remove();
      // A day separator left with no line of its day under it goes too.
      const isDay = (/** @type {Element | null | undefined} */ el) => el?.classList.contains('log-day') ?? false;
      while (isDay(this.log.firstElementChild) && isDay(this.log.firstElementChild?.nextElementSibling)) {
        this.log.firstElementChild?.remove();
      }
    }
    const count = /** @type {HTMLElement} */ (this.querySelector('[data-role=count]'));
    count.textContent = `${this.lines} event${this.lines === 1 ? '' : 's'}`;
    if (live) {
      this.scrollToEnd();
      if (kind !== 'log') this.dispatchEvent(new CustomEvent('svc:run-changed', { bubbles: true }));
    }
  }

  scrollToEnd() {
    const follow = /** @type {HTMLInputElement | null} */ (this.querySelector('[data-role=follow]'));
    if (follow?.checked) this.log.scrollTop = this.log.scrollHeight;
  }
}

export function registerEventLog() {
  if (!customElements.get('svc-event-log')) customElements.define('svc-event-log', EventLog);
}
