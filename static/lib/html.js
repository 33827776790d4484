// @ts-check
// The escaping `html` tagged template: every interpolated value is escaped unless it is itself template output.
// It must never gain a "raw string" escape hatch: data reaches the DOM only through here or textContent.

const ESCAPES = /** @type {Record<string, string>} */ ({
  '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;',
});
// A value placed right after one of these attribute openings is a URL: it also goes through safeUrl.
const URL_ATTRIBUTE = /^<[a-zA-Z][^<>]*\s(?:href|src|action|formaction|xlink:href|poster|cite)\s*=\s*["']$/i;
// An unquoted attribute value could break out with a space; the template refuses to build one.
const UNQUOTED_ATTRIBUTE = /^<[a-zA-Z][^<>]*\s[\w:-]+\s*=\s*$/;
const SAFE_PROTOCOLS = new Set(['http:', 'https:', 'mailto:']);

/** Markup built by `html`; only this module creates it. */
export class SafeHtml {
  /** @param {string} markup */
  constructor(markup) {
    /** @readonly */
    this.markup = markup;
  }
  toString() {
    return this.markup;
  }
}

/** @param {unknown} value */
export function escapeHtml(value) {
  return String(value).replace(/[&<>"'`]/g, (c) => ESCAPES[c] ?? c);
}

/**
 * Keeps http(s), mailto and relative URLs; anything else (javascript:, data:, …) becomes "#".
 * @param {unknown} value
 */
export function safeUrl(value) {
  const text = String(value ?? '').trim();
  try {
    const parsed = new URL(text, 'http://relative.invalid/');
    return SAFE_PROTOCOLS.has(parsed.protocol) ? text : '#';
  } catch {
    return '#';
  }
}

/** The open tag the markup so far ends inside, or "" when it ends in text. @param {string} markup */
function openTag(markup) {
  const lt = markup.lastIndexOf('<');
  return lt > markup.lastIndexOf('>') ? markup.slice(lt) : '';
}

/** @param {unknown} value @param {boolean} isUrl @returns {string} */
function toMarkup(value, isUrl) {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.markup;
  if (Array.isArray(value)) return value.map((v) => toMarkup(v, false)).join('');
  return escapeHtml(isUrl ? safeUrl(value) : value);
}

/**
 * Tagged template: html`<td>${run.brief}</td>`. Arrays of template results are joined; null/undefined/false render
 * nothing.
 * @param {TemplateStringsArray} strings
 * @param {...unknown} values
 */
export function html(strings, ...values) {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) {
    const tag = openTag(out);
    if (UNQUOTED_ATTRIBUTE.test(tag)) throw new Error('html template: quote attribute values ("${…}")');
    out += toMarkup(values[i], URL_ATTRIBUTE.test(tag)) + (strings[i + 1] ?? '');
  }
  return new SafeHtml(out);
}

/**
 * Replaces an element's content with template output (and nothing else).
 * @param {Element} target @param {SafeHtml} content
 */
export function render(target, content) {
  if (!(content instanceof SafeHtml)) throw new TypeError('render() takes html`…` output only');
  target.innerHTML = content.markup;
}
