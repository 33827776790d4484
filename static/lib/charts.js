// @ts-check
// Inline SVG charts built with the escaping template: vertical bars per day and horizontal bars per category.
// Colours come from CSS classes (light/dark aware); no style attributes, which the CSP would block anyway.
// Unknown values are drawn with a real hatched SVG pattern (the same one the legend swatch uses), never as zero.
import { html } from './html.js';

/**
 * value: the measured part (null = nothing measured); unknown: some of it is not measured (a hatched cap);
 * none: there is nothing to show that day (no bar, e.g. no run finished), which is not the same as unknown.
 * @typedef {{label: string, value: number | null, title?: string, unknown?: boolean, none?: boolean}} Point
 */

const W = 520;
const H = 190;
const PAD = { top: 12, right: 8, bottom: 26, left: 52 };

/** @param {number} max */
function niceMax(max) {
  if (!(max > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 4, 6, 8, 10].map((m) => m * p).find((v) => v >= max) ?? max;
}

/** The hatch pattern, defined once per chart with an id of its own. @param {string} id */
function hatchDef(id) {
  return html`<defs><pattern id="${id}" class="hatch" patternUnits="userSpaceOnUse" width="6" height="6"
    patternTransform="rotate(45)">
    <rect class="hatch-bg" width="6" height="6"></rect><line class="hatch-line" x1="0" y1="0" x2="0" y2="6"></line>
    </pattern></defs>`;
}

/** A small legend swatch drawn with the same pattern as the bars. @param {string} text */
export function hatchLegend(text) {
  return html`<p class="muted legend"><svg class="swatch-svg" width="14" height="14" viewBox="0 0 14 14"
    aria-hidden="true">${hatchDef('hatch-legend')}<rect class="bar unknown" width="14" height="14"
    fill="url(#hatch-legend)"></rect></svg> ${text}</p>`;
}

/**
 * Bars over time (one per day, every day of the window). Unknown values get a hatched stub or cap.
 * @param {Point[]} points
 * @param {{label: string, format: (v: number) => string, max?: number, kind?: string, caption?: string}} opts
 */
export function columnChart(points, opts) {
  if (points.length === 0) return html`<p class="muted">No runs in this window.</p>`;
  const kind = opts.kind ?? 'default';
  const hatch = `hatch-${kind}`;
  const max = opts.max ?? niceMax(Math.max(0, ...points.map((p) => p.value ?? 0)));
  const innerW = W - PAD.left - PAD.right;
  const innerH = H - PAD.top - PAD.bottom;
  const step = innerW / points.length;
  const barW = Math.max(1, Math.min(28, step * 0.7));
  const labelEvery = Math.ceil(points.length / 8);
  const stub = innerH * 0.08;
  const y = (/** @type {number} */ v) => PAD.top + innerH - (v / max) * innerH;
  return html`<svg class="chart chart-${kind}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${opts.label}">
    <title>${opts.label}</title>
    ${hatchDef(hatch)}
    ${[0, 0.5, 1].map((f) => html`<line class="grid" x1="${PAD.left}" x2="${W - PAD.right}" y1="${y(max * f)}"
      y2="${y(max * f)}"></line>
      <text class="axis" x="${PAD.left - 6}" y="${y(max * f) + 4}" text-anchor="end">${opts.format(max * f)}</text>`)}
    ${points.map((p, i) => {
      const x = PAD.left + i * step + (step - barW) / 2;
      const tip = p.title ?? `${p.label}: ${p.value === null ? 'unknown' : opts.format(p.value)}`;
      const top = p.value === null ? y(0) : y(p.value);
      return html`<g data-day="${p.label}">
        ${p.value !== null ? html`<rect class="bar" x="${x}" y="${top}" width="${barW}"
          height="${Math.max(0, y(0) - top)}"><title>${tip}</title></rect>` : ''}
        ${p.unknown || (p.value === null && !p.none) ? html`<rect class="bar unknown" x="${x}" y="${top - stub}"
          width="${barW}" height="${stub}" fill="url(#${hatch})"><title>${tip}</title></rect>` : ''}
        ${p.none ? html`<rect class="bar-hit" x="${x}" y="${PAD.top}" width="${barW}" height="${innerH}">
          <title>${tip}</title></rect>` : ''}
        ${i % labelEvery === 0
          ? html`<text class="axis" x="${x + barW / 2}" y="${H - 8}" text-anchor="middle">${p.label}</text>`
          : ''}
      </g>`;
    })}
  </svg>${opts.caption ? html`<p class="muted chart-caption">${opts.caption}</p>` : ''}`;
}

/**
 * Horizontal bars, one per category, largest first. Unknown values are hatched and labelled "unknown".
 * @param {Point[]} points
 * @param {{label: string, format: (v: number) => string, kind?: string}} opts
 */
export function barList(points, opts) {
  if (points.length === 0) return html`<p class="muted">No runs in this window.</p>`;
  const hatch = `hatch-bars-${opts.kind ?? 'default'}`;
  const sorted = points.slice().sort((a, b) => (b.value ?? -1) - (a.value ?? -1));
  const max = Math.max(0, ...sorted.map((p) => p.value ?? 0)) || 1;
  const rowH = 30;
  const labelW = 150;
  const valueW = 150;
  const barMax = W - labelW - valueW;
  return html`<svg class="chart chart-bars" viewBox="0 0 ${W} ${sorted.length * rowH + 4}" role="img"
    aria-label="${opts.label}">
    <title>${opts.label}</title>
    ${hatchDef(hatch)}
    ${sorted.map((p, i) => {
      const yy = i * rowH + 2;
      const width = p.value === null ? 0 : Math.max(2, (p.value / max) * barMax);
      const cap = p.unknown || p.value === null ? 24 : 0;
      return html`<g>
        <text class="axis label" x="${labelW - 8}" y="${yy + 20}"
          text-anchor="end">${p.label.length > 20 ? `${p.label.slice(0, 19)}…` : p.label}</text>
        ${p.value !== null ? html`<rect class="bar" x="${labelW}" y="${yy + 4}" width="${width}" height="${rowH - 8}">
          <title>${p.title ?? p.label}</title></rect>` : ''}
        ${cap ? html`<rect class="bar unknown" x="${labelW + width}" y="${yy + 4}" width="${cap}" height="${rowH - 8}"
          fill="url(#${hatch})"><title>${p.title ?? p.label}</title></rect>` : ''}
        <text class="axis value" x="${labelW + width + cap + 6}" y="${yy + 20}">${p.value === null
          ? 'unknown'
          : `${opts.format(p.value)}${p.unknown ? ' + unknown' : ''}`}</text>
      </g>`;
    })}
  </svg>`;
}

/**
 * Every UTC day from `from` to `to` (inclusive), "YYYY-MM-DD": the server counts per UTC day, and a chart must not
 * drop the days nothing happened on. @param {string} from @param {string} to
 */
export function utcDays(from, to) {
  const out = [];
  const end = Date.parse(`${to}T00:00:00Z`);
  for (let t = Date.parse(`${from}T00:00:00Z`); Number.isFinite(t) && t <= end && out.length < 5000; t += 86_400_000) {
    out.push(new Date(t).toISOString().slice(0, 10));
  }
  return out;
}
