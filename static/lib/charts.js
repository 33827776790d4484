// @ts-check
// Inline SVG charts built with the escaping template: vertical bars per day and horizontal bars per category.
// Colours come from CSS classes (light/dark aware); no style attributes, which the CSP would block anyway.
import { html } from './html.js';

/** @typedef {{label: string, value: number | null, title?: string}} Point */

const W = 520;
const H = 190;
const PAD = { top: 12, right: 8, bottom: 26, left: 44 };

/** @param {number} max */
function niceMax(max) {
  if (!(max > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 4, 6, 8, 10].map((m) => m * p).find((v) => v >= max) ?? max;
}

/**
 * Bars over time (one per day). Null values are drawn as a hatched "unknown" stub, not as zero.
 * @param {Point[]} points
 * @param {{label: string, format: (v: number) => string, max?: number, kind?: string}} opts
 */
export function columnChart(points, opts) {
  if (points.length === 0) return html`<p class="muted">No data in this window.</p>`;
  const max = opts.max ?? niceMax(Math.max(0, ...points.map((p) => p.value ?? 0)));
  const innerW = W - PAD.left - PAD.right;
  const innerH = H - PAD.top - PAD.bottom;
  const step = innerW / points.length;
  const barW = Math.max(1, Math.min(28, step * 0.7));
  const labelEvery = Math.ceil(points.length / 8);
  const y = (/** @type {number} */ v) => PAD.top + innerH - (v / max) * innerH;
  return html`<svg class="chart chart-${opts.kind ?? 'default'}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${opts.label}">
    <title>${opts.label}</title>
    ${[0, 0.5, 1].map((f) => html`<line class="grid" x1="${PAD.left}" x2="${W - PAD.right}" y1="${y(max * f)}" y2="${y(max * f)}"></line>
      <text class="axis" x="${PAD.left - 6}" y="${y(max * f) + 4}" text-anchor="end">${opts.format(max * f)}</text>`)}
    ${points.map((p, i) => {
      const x = PAD.left + i * step + (step - barW) / 2;
      const tip = p.title ?? `${p.label}: ${p.value === null ? 'unknown' : opts.format(p.value)}`;
      return html`<g>
        ${p.value === null
          ? html`<rect class="bar unknown" x="${x}" y="${y(max * 0.08)}" width="${barW}" height="${innerH * 0.08}"><title>${tip}</title></rect>`
          : html`<rect class="bar" x="${x}" y="${y(p.value)}" width="${barW}" height="${Math.max(0, y(0) - y(p.value))}"><title>${tip}</title></rect>`}
        ${i % labelEvery === 0 ? html`<text class="axis" x="${x + barW / 2}" y="${H - 8}" text-anchor="middle">${p.label}</text>` : ''}
      </g>`;
    })}
  </svg>`;
}

/**
 * Horizontal bars, one per category, largest first. Unknown values are listed as "unknown".
 * @param {Point[]} points
 * @param {{label: string, format: (v: number) => string}} opts
 */
export function barList(points, opts) {
  if (points.length === 0) return html`<p class="muted">No data in this window.</p>`;
  const sorted = points.slice().sort((a, b) => (b.value ?? -1) - (a.value ?? -1));
  const max = Math.max(0, ...sorted.map((p) => p.value ?? 0)) || 1;
  const rowH = 30;
  const labelW = 150;
  const valueW = 90;
  const barMax = W - labelW - valueW;
  return html`<svg class="chart chart-bars" viewBox="0 0 ${W} ${sorted.length * rowH + 4}" role="img" aria-label="${opts.label}">
    <title>${opts.label}</title>
    ${sorted.map((p, i) => {
      const yy = i * rowH + 2;
      const width = p.value === null ? 0 : Math.max(2, (p.value / max) * barMax);
      return html`<g>
        <text class="axis label" x="${labelW - 8}" y="${yy + 20}" text-anchor="end">${p.label.length > 20 ? `${p.label.slice(0, 19)}…` : p.label}</text>
        <rect class="bar${p.value === null ? ' unknown' : ''}" x="${labelW}" y="${yy + 4}" width="${p.value === null ? 24 : width}" height="${rowH - 8}"><title>${p.title ?? p.label}</title></rect>
        <text class="axis value" x="${labelW + (p.value === null ? 24 : width) + 6}" y="${yy + 20}">${p.value === null ? 'unknown' : opts.format(p.value)}</text>
      </g>`;
    })}
  </svg>`;
}
