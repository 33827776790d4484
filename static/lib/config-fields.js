// @ts-check
// Config form fields from the values GET /v1/config returns. The common settings get a readable label, a line of
// help and a proper field (numbers with their minimum, repositories one path per line, command providers as rows);
// any other setting falls back by its value's type: checkbox, number, text, or JSON. Reading them back yields only
// the keys that changed.
import { html } from './html.js';
import { providersControl, providersValue } from './config-providers.js';

/**
 * What the form knows of each common setting (the server's list is src/control/config-schema.ts).
 * @type {Record<string, {label: string, help: string, kind: 'number' | 'lines' | 'provider' | 'providers',
 *   min?: number}>}
 */
const COMMON = {
  max_concurrent_runs: {
    label: 'Runs at once', kind: 'number', min: 1,
    help: 'How many runs may be queued, running, blocked or stopping at the same time; more are refused until ' +
      'one ends.',
  },
  retention_days: {
    label: 'Keep ended runs for (days)', kind: 'number', min: 0,
    help: 'Ended runs, with their events and artifacts, are deleted this many days after they end; 0 keeps them.',
  },
  default_provider: {
    label: 'Default provider', kind: 'provider',
    help: 'The agent a start uses when it names none: one the Providers page lists. Empty: the project decides ' +
      '(its .svc/config.json, else the first agent CLI found).',
  },
  repos: {
    label: 'Project repositories', kind: 'lines',
    help: 'Absolute paths, one per line, where runs may be started (next to the projects you imported).',
  },
  providers: {
    label: 'Command providers', kind: 'providers',
    help: 'Your own agent commands, for every run started here (by name, or as the default provider). The ' +
      'program is a name on PATH or an absolute path; the prompt arrives on stdin and in the file SVC_TASK_FILE names.',
  },
};

const BUILTIN = ['claude', 'codex', 'gemini', 'aider', 'opencode'];

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

/**
 * The input for one setting. @param {string} key @param {unknown} value @param {string} id @param {string} errorId
 * @param {Record<string, unknown>} config
 */
function control(key, value, id, errorId, config) {
  const common = COMMON[key];
  const described = `${errorId} ${id}-help`;
  if (common?.kind === 'providers') {
    return providersControl(id, described, /** @type {Record<string, {command?: unknown}>} */ (value ?? {}));
  }
  if (common?.kind === 'lines') {
    const lines = Array.isArray(value) ? value.map(String) : [];
    return html`<textarea id="${id}" name="${key}" data-kind="lines" rows="${Math.max(3, lines.length + 1)}"
      spellcheck="false" placeholder="/home/me/projects/api"
      aria-describedby="${described}">${lines.join('\n')}</textarea>`;
  }
  if (common?.kind === 'provider') {
    const configured = Object.keys(/** @type {object} */ (config.providers ?? {}));
    const names = [...BUILTIN, ...configured].map((n) => html`<option value="${n}"></option>`);
    return html`<input type="text" id="${id}" name="${key}" data-kind="text" value="${value ?? ''}" list="${id}-names"
        placeholder="the project decides" autocomplete="off" aria-describedby="${described}">
      <datalist id="${id}-names">${names}</datalist>`;
  }
  switch (kindOf(value)) {
    case 'boolean':
      return html`<input type="checkbox" id="${id}" name="${key}" data-kind="boolean" ${value ? html`checked` : ''}
        aria-describedby="${errorId}">`;
    case 'number':
      return html`<input type="number" step="1" id="${id}" name="${key}" data-kind="number" value="${String(value)}"
        ${common?.min !== undefined ? html`min="${String(common.min)}"` : ''} aria-describedby="${described}">`;
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

/** @param {string} key @param {unknown} value @param {Record<string, unknown>} [config] the whole config */
export function configField(key, value, config = {}) {
  const id = fieldId(key);
  const errorId = `${id}-error`;
  const common = COMMON[key];
  return html`<div class="config-field" data-key="${key}">
    <div class="config-label">
      <label for="${id}">${common?.label ?? key}</label>
      ${common ? html`<span class="mono muted config-key">${key}</span>` : ''}
    </div>
    <div class="config-input">
      ${control(key, value, id, errorId, config)}
      ${common ? html`<p class="muted config-help" id="${id}-help">${common.help}</p>` : ''}
      <p class="field-error" id="${errorId}" role="alert" hidden></p>
    </div>
  </div>`;
}

/** Settings the form names in plain words come first, in this order; the rest follow by key. @param {string[]} keys */
export function orderedKeys(keys) {
  const common = Object.keys(COMMON).filter((k) => keys.includes(k));
  return [...common, ...keys.filter((k) => !(k in COMMON)).sort()];
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
    const key = input.dataset.kind === 'providers' ? 'providers' : input.name;
    let value;
    switch (input.dataset.kind) {
      case 'boolean':
        value = /** @type {HTMLInputElement} */ (input).checked;
        break;
      case 'number':
        value = input.value.trim() === '' ? null : Number(input.value);
        break;
      case 'lines':
        value = input.value.split('\n').map((line) => line.trim()).filter(Boolean);
        break;
      case 'providers':
        value = providersValue(/** @type {HTMLElement} */ (/** @type {unknown} */ (input)));
        break;
      case 'json':
        try {
          value = JSON.parse(input.value);
        } catch {
          throw { key, message: 'This is not valid JSON' };
        }
        break;
      default:
        value = input.value.trim() === '' && (loaded[key] === null || COMMON[key]) ? null : input.value;
    }
    if (JSON.stringify(value) !== JSON.stringify(loaded[key])) out[key] = value;
  }
  return out;
}
