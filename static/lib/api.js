// @ts-check
// The one wrapper around fetch: adds the bearer token from sessionStorage and turns the error envelope into ApiError.
// It never logs or displays the token; a 401 is handed to the app's token prompt, which may supply a new one.

import { markFresh, markUnreachable } from './connection.js';

const TOKEN_KEY = 'svc.control.token';

export class ApiError extends Error {
  /**
   * `field` is the request field the server named in the Svc-Error-Field header (a setting's key), so no one
   * parses the message (the error body itself is exactly {"error":{"code","message"}}, as the spec says).
   * @param {string} code @param {string} message @param {number} status @param {string | null} [field]
   */
  constructor(code, message, status, field = null) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.status = status;
    this.field = field;
  }
}

export function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) ?? '';
  } catch {
    return '';
  }
}

/** @param {string} token */
export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** @type {((rejected: boolean) => Promise<boolean>) | null} */
let askForToken = null;
/** @type {Promise<boolean> | null} */
let asking = null;

/**
 * Installs the prompt used on 401: it resolves true once a new token is stored, false if the person gave up.
 * Concurrent 401s share one prompt so the person is asked once.
 * @param {(rejected: boolean) => Promise<boolean>} prompt
 */
export function onUnauthorized(prompt) {
  askForToken = prompt;
}

/** @param {boolean} rejected */
export function requestToken(rejected) {
  if (!askForToken) return Promise.resolve(false);
  asking ??= askForToken(rejected).finally(() => {
    asking = null;
  });
  return asking;
}

/** Headers every /v1 call carries. @param {Record<string, string>} [extra] @returns {Record<string, string>} */
export function authHeaders(extra = {}) {
  const token = getToken();
  return token ? { ...extra, authorization: `Bearer ${token}` } : { ...extra };
}

/** @param {Response} response */
export async function toApiError(response) {
  let code = 'http_' + response.status;
  let message = response.statusText || `HTTP ${response.status}`;
  const field = response.headers.get('svc-error-field');
  try {
    const body = await response.json();
    if (body && body.error && typeof body.error.code === 'string') {
      code = body.error.code;
      message = String(body.error.message ?? code);
    }
  } catch {
    // Not the JSON envelope (a proxy page, say): keep the status line.
  }
  return new ApiError(code, message, response.status, field);
}

/**
 * @typedef {{
 *   method?: string, body?: unknown, headers?: Record<string, string>, signal?: AbortSignal, raw?: boolean,
 * }} RequestOptions
 */

/**
 * Calls the API and returns parsed JSON (or the Response when raw). Retries once after a new token is entered.
 * @param {string} path
 * @param {RequestOptions} [options]
 * @returns {Promise<any>}
 */
export async function api(path, options = {}) {
  for (let attempt = 0; ; attempt++) {
    const hadToken = getToken() !== '';
    const headers = authHeaders(options.headers);
    /** @type {RequestInit} */
    const init = { method: options.method ?? 'GET', headers, cache: 'no-store' };
    if (options.signal) init.signal = options.signal;
    if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      init.body = JSON.stringify(options.body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      if (err instanceof DOMException && err.name === 'AbortError') throw err;
      markUnreachable();
      throw new ApiError('network_error', 'Could not reach the Control Plane', 0);
    }
    // A proxy's 502/503/504 means the Control Plane behind it is gone; anything else came from the server itself.
    if (response.status >= 502 && response.status <= 504) markUnreachable();
    else if (response.ok) markFresh();
    if (response.status === 401 && attempt < 5 && (await requestToken(hadToken))) continue;
    if (!response.ok) throw await toApiError(response);
    if (options.raw) return response;
    if (response.status === 204) return null;
    return response.json();
  }
}

/**
 * Builds a query string from defined, non-empty values.
 * @param {Record<string, string | number | null | undefined>} params
 */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const text = q.toString();
  return text ? `?${text}` : '';
}

/** Path of a run: both segments encoded. @param {{source: string, run: string}} id */
export function runPath(id) {
  return `/v1/runs/${encodeURIComponent(id.source)}/${encodeURIComponent(id.run)}`;
}

/**
 * Normalizes list answers ({items}, a bare array, or {<name>: [...]}) to an array.
 * @param {any} body @param {string} [key] @returns {any[]}
 */
export function itemsOf(body, key) {
  if (Array.isArray(body)) return body;
  if (body && Array.isArray(body.items)) return body.items;
  if (body && key && Array.isArray(body[key])) return body[key];
  return [];
}
