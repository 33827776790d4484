// @ts-check
// The config page's editor for `providers` (command providers): one row per provider, a name and its command with
// one argument per line, rows added and removed in place. "Edit as JSON" is the escape hatch for what rows cannot
// say (an argument holding a line break): while it is open, its text is the value.
import { html, render } from './html.js';

/** @param {string} name @param {string[]} command */
function row(name, command) {
  return html`<fieldset class="provider-row" data-role="provider-row">
    <legend class="sr-only">Command provider</legend>
    <label>Name <input type="text" data-role="provider-name" value="${name}" autocomplete="off"
      placeholder="my-agent" pattern="[a-z0-9][a-z0-9_-]*"></label>
    <label>Command, one argument per line <textarea data-role="provider-command" rows="${Math.max(2, command.length)}"
      spellcheck="false" placeholder="/usr/local/bin/my-agent&#10;--yes">${command.join('\n')}</textarea></label>
    <button type="button" class="link-button" data-action="remove-provider">Remove</button>
  </fieldset>`;
}

/**
 * The editor for the providers value. @param {string} id @param {string} errorId
 * @param {Record<string, {command?: unknown}>} value
 */
export function providersControl(id, errorId, value) {
  const entries = Object.entries(value ?? {});
  const json = JSON.stringify(value ?? {}, null, 2);
  return html`<div class="providers-editor" id="${id}" data-kind="providers" data-name="providers" tabindex="-1"
      aria-describedby="${errorId}">
    <div data-role="provider-rows">${entries.length === 0
      ? html`<p class="muted" data-role="no-providers">None yet: the built-in agent CLIs are used.</p>`
      : entries.map(([name, spec]) => row(name, Array.isArray(spec?.command) ? spec.command.map(String) : []))}</div>
    <button type="button" data-action="add-provider">Add a command provider</button>
    <details data-role="providers-json"><summary>Edit as JSON</summary>
      <textarea rows="${Math.min(10, json.split('\n').length + 1)}" spellcheck="false"
        aria-label="Command providers as JSON">${json}</textarea></details>
  </div>`;
}

/** Handles the editor's buttons; true when the click was one of them. @param {Event} event */
export function providersClick(event) {
  const target = event.target instanceof Element ? event.target : null;
  const editor = target?.closest('.providers-editor');
  if (!target || !editor) return false;
  if (target.closest('[data-action=add-provider]')) {
    editor.querySelector('[data-role=no-providers]')?.remove();
    const rows = /** @type {HTMLElement} */ (editor.querySelector('[data-role=provider-rows]'));
    const slot = document.createElement('div');
    rows.append(slot);
    render(slot, row('', []));
    slot.replaceWith(...slot.childNodes);
    /** @type {HTMLInputElement | null} */ (rows.lastElementChild?.querySelector('input') ?? null)?.focus();
    return true;
  }
  if (target.closest('[data-action=remove-provider]')) {
    target.closest('[data-role=provider-row]')?.remove();
    return true;
  }
  return false;
}

/**
 * The value the editor holds. Throws {key, message} for JSON that does not parse or a row without a name or command.
 * @param {HTMLElement} editor
 */
export function providersValue(editor) {
  const details = /** @type {HTMLDetailsElement | null} */ (editor.querySelector('[data-role=providers-json]'));
  if (details?.open) {
    try {
      return JSON.parse(/** @type {HTMLTextAreaElement} */ (details.querySelector('textarea')).value);
    } catch {
      throw { key: 'providers', message: 'This is not valid JSON' };
    }
  }
  /** @type {Record<string, {command: string[]}>} */
  const out = {};
  for (const r of editor.querySelectorAll('[data-role=provider-row]')) {
    const name = /** @type {HTMLInputElement} */ (r.querySelector('[data-role=provider-name]')).value.trim();
    const text = /** @type {HTMLTextAreaElement} */ (r.querySelector('[data-role=provider-command]')).value;
    const command = text.split('\n').map((a) => a.trim()).filter(Boolean);
    if (!name && command.length === 0) continue;
    if (!name) throw { key: 'providers', message: 'Give every command provider a name' };
    if (command.length === 0) throw { key: 'providers', message: `Give the provider "${name}" a command` };
    out[name] = { command };
  }
  return out;
}
