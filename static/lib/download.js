// @ts-check
// Opens or saves an API file. A plain link cannot carry the bearer token, so with a token set the file is fetched
// with it and handed to the browser as a blob URL.
import { api, getToken } from './api.js';

/**
 * @param {string} path API path of the file
 * @param {string} filename name to save it as
 */
export async function downloadFile(path, filename) {
  /** @type {Response} */
  const response = await api(path, { raw: true });
  const blob = await response.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * Click handler for <a href="/v1/…" download>: lets the browser follow it when no token is needed.
 * @param {MouseEvent} event
 * @param {(err: unknown) => void} onError
 */
export function tokenAwareLink(event, onError) {
  const target = event.target;
  const a = /** @type {HTMLElement | null} */ (target instanceof Element ? target.closest('a[data-api-file]') : null);
  if (!a || !getToken()) return;
  event.preventDefault();
  const path = a.getAttribute('href') ?? '';
  downloadFile(path, a.dataset.apiFile || path.split('/').pop() || 'download').catch(onError);
}
