// @ts-check
// <svc-run-timeline>: the run from start to end as one horizontal SVG bar — queued, provider invocations, blocked
// waits (the question on hover), checks (pass/fail), receipt and PR marks. It takes the events the event log loads
// and streams (`svc:event`), so it is live while the run is: open spans grow with the clock.
import { html, render } from '../lib/html.js';
import { buildTimeline } from '../lib/timeline.js';
import { clock, duration, absolute } from '../lib/time.js';

const W = 1000;
const H = 74;
const BAR_Y = 26;
const BAR_H = 22;

class RunTimeline extends HTMLElement {
  constructor() {
    super();
    /** @type {{source: string, run: string} | null} */
    this.runId = null;
    /** @type {any} */
    this.run = null;
    /** @type {import('../lib/timeline.js').TimelineEvent[]} */
    this.events = [];
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.pending = undefined;
    /** @type {ReturnType<typeof setInterval> | undefined} */
    this.ticker = undefined;
    /** @type {(e: Event) => void} */
    this.onEvent = (e) => {
      const d = /** @type {CustomEvent} */ (e).detail;
      // Provider output is most of a run's events and says nothing the bar shows: only svc's own lines are kept.
      if (d.kind === 'log' && d.data?.stream !== 'svc') return;
      this.events.push({ id: d.id, kind: d.kind, data: d.data, ts: d.ts });
      this.schedule();
    };
  }

  connectedCallback() {
    render(this, html`<p class="muted">No events yet.</p>`);
    // The event log is a sibling: its events bubble to the run page, where this listens.
    this.host = this.closest('svc-run-detail') ?? document;
    this.host.addEventListener('svc:event', this.onEvent);
    this.ticker = setInterval(() => {
      if (this.run && !this.run.ended_at) this.draw();
    }, 1000);
  }

  disconnectedCallback() {
    this.host?.removeEventListener('svc:event', this.onEvent);
    clearInterval(this.ticker);
    clearTimeout(this.pending);
  }

  /** @param {any} run */
  update(run) {
    this.run = run;
    this.schedule();
  }

  /** History arrives as hundreds of events at once: draw once per burst. */
  schedule() {
    clearTimeout(this.pending);
    this.pending = setTimeout(() => this.draw(), 50);
  }

  draw() {
    if (!this.run) return;
    const t = buildTimeline(this.run, this.events, Date.now());
    if (!t) return;
    const span = t.end - t.start;
    const x = (/** @type {number} */ ms) => ((ms - t.start) / span) * W;
    const w = (/** @type {number} */ a, /** @type {number} */ b) => Math.max(2, x(b) - x(a));
    const live = t.live;
    /** @param {import('../lib/timeline.js').Span} s */
    const spanRect = (s) => {
      const result = s.kind === 'check' ? (s.ok ? ' pass' : ' fail') : '';
      const tip = `${s.label} · ${clock(s.start)}–${clock(s.end)} (${duration(s.end - s.start)})`;
      return html`<rect class="tl-span tl-${s.kind}${result}${s.open ? ' open' : ''}" x="${x(s.start)}" y="${BAR_Y}"
        width="${w(s.start, s.end)}" height="${BAR_H}"><title>${tip}</title></rect>`;
    };
    /**
     * Blocked waits are drawn over the bar, taller, hatched; the question is their hover text.
     * @param {import('../lib/timeline.js').Span} s
     */
    const waitRect = (s) => html`<rect class="tl-span tl-blocked${s.open ? ' open' : ''}"
      x="${x(s.start)}" y="${BAR_Y - 6}" width="${w(s.start, s.end)}" height="${BAR_H + 12}" fill="url(#tl-hatch)">
      <title>${s.label} · waited ${duration(s.end - s.start)}</title></rect>`;
    /** @param {import('../lib/timeline.js').Mark} m */
    const mark = (m) => html`<g class="tl-mark tl-${m.kind}">
      <line x1="${x(m.at)}" x2="${x(m.at)}" y1="${BAR_Y - 10}" y2="${BAR_Y + BAR_H + 4}"></line>
      <circle cx="${x(m.at)}" cy="${BAR_Y - 12}" r="5"></circle><title>${m.label} · ${clock(m.at)}</title></g>`;
    const hatch = html`<defs>
      <pattern id="tl-hatch" patternUnits="userSpaceOnUse" width="8" height="8" patternTransform="rotate(45)">
        <rect class="tl-hatch-bg" width="8" height="8"></rect>
        <line class="tl-hatch-line" x1="0" y1="0" x2="0" y2="8"></line>
      </pattern></defs>`;
    /** @param {string} cls @param {string} text */
    const key = (cls, text) => html`<span class="${cls}"></span>${text} `;
    render(this, html`<svg class="timeline" viewBox="0 0 ${W} ${H}" role="img"
        aria-label="Run timeline, ${duration(span)}" data-live="${live ? 'yes' : 'no'}">
      <title>Run timeline: ${absolute(t.start, true)} to ${absolute(t.end, true)} (${duration(span)})</title>
      ${hatch}
      <rect class="tl-track" x="0" y="${BAR_Y}" width="${W}" height="${BAR_H}">
        <title>${duration(span)} in all</title></rect>
      ${t.spans.filter((s) => s.kind !== 'blocked').map(spanRect)}
      ${t.spans.filter((s) => s.kind === 'blocked').map(waitRect)}
      ${t.marks.map(mark)}
      <text class="axis" x="0" y="${H - 4}">${clock(t.start)}</text>
      <text class="axis" x="${W}" y="${H - 4}" text-anchor="end">
        ${live ? 'now' : clock(t.end)} · ${duration(span)}</text>
    </svg>
    <p class="timeline-legend muted">${key('key tl-queued', 'queued')}${key('key tl-provider', 'provider')}
      ${key('key tl-blocked', 'waiting for an answer')}${key('key tl-check pass', 'check passed')}
      ${key('key tl-check fail', 'check failed')}${key('key-mark tl-receipt', 'receipt')}
      ${key('key-mark tl-pr', 'PR')}${key('key-mark tl-retry', 'automatic retry')}</p>`);
  }
}

export function registerRunTimeline() {
  if (!customElements.get('svc-run-timeline')) customElements.define('svc-run-timeline', RunTimeline);
}
