// @ts-check
// Config form fields from the values GET /v1/config returns: checkbox for booleans, number for integers,
// text for strings, JSON for lists and objects. Reading them back yields only the keys that changed.
import { html } from './html.js';

/** @param {string} key */
export function fieldId(key) {
  return `cfg-${key.replace(/[^A-Za-z0-9_-]/g, '-')}`;
}

/** @param {unknown} value @returns {'boolean' | 'number' | 'json' | 'text'} */
function kindOf(value) {
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'number') return 'number';
  return value !== null && typeof value === 'object' ? 'json' : 'text';
}

/** The input for one setting. @param {string} key @param {unknown} value @param {string} id @param {string} errorId */
function control(key, value, id, errorId) {
  switch (kindOf(value)) {
    case 'boolean':
      return html`<input type="checkbox" id="${id}" name="${key}" data-kind="boolean" ${value ? html`checked` : ''}
        aria-describedby="${errorId}">`;
    case 'number':
      return html`<input type="number" step="1" id="${id}" name="${key}" data-kind="number" value="${String(value)}"
        aria-describedby="${errorId}">`;
    case 'json': {
      const text = JSON.stringify(value, null, 2);
      return html`<textarea id="${id}" name="${key}" data-kind="json" rows="${Math.min(8, text.split('\n').length + 1)}"
        spellcheck="false" aria-describedby="${errorId}">${text}</textarea>`;
    }
    default:
      return html`<input type="${value === '***' ? 'password' : 'text'}" id="${id}" name="${key}" data-kind="text"
        value="${value ?? ''}" placeholder="${value === null ? 'not set' : ''}" autocomplete="off"
        aria-describedby="${errorId}">`;
  }
}

/** @param {string} key @param {unknown} value */
export function configField(key, value) {
  const id = fieldId(key);
  const errorId = `${id}-error`;
  return html`<div class="config-field" data-key="${key}">
    <label for="${id}" class="mono">${key}</label>
    ${control(key, value, id, errorId)}
    <p class="field-error" id="${errorId}" role="alert" hidden></p>
  </div>`;
}

/**
 * The keys whose value differs from what was loaded. Throws {key, message} for JSON that does not parse.
 * @param {HTMLFormElement} form @param {Record<string, unknown>} loaded
 */
export function changedValues(form, loaded) {
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const el of form.querySelectorAll('[data-kind]')) {
    const input = /** @type {HTMLInputElement | HTMLTextAreaElement} */ (el);
    const key = input.name;
    let value;
    switch (input.dataset.kind) {
      case 'boolean':
        value = /** @type {HTMLInputElement} */ (input).checked;
        break;
      case 'number':
        value = input.value.trim() === '' ? null : Number(input.value);
        break;
      case 'json':
        try {
          value = JSON.parse(input.value);
        } catch {
          throw { key, message: 'This is not valid JSON' };
        }
        break;
      default:
        value = input.value === '' && loaded[key] === null ? null : input.value;
    }
    if (JSON.stringify(value) !== JSON.stringify(loaded[key])) out[key] = value;
  }
  return out;
}
