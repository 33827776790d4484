// @ts-check
// The URL hash is the UI's address: "#/runs?verdict=verified&repo=acme%2Fapi". Pure helpers, no DOM.

/** @typedef {{ path: string, segments: string[], query: URLSearchParams }} Route */

/** @param {string} hash location.hash @returns {Route} */
export function parseHash(hash) {
  const text = hash.replace(/^#/, '') || '/runs';
  const q = text.indexOf('?');
  const path = q === -1 ? text : text.slice(0, q);
  const segments = path.split('/').filter(Boolean).map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  return { path: '/' + segments.join('/'), segments, query: new URLSearchParams(q === -1 ? '' : text.slice(q + 1)) };
}

/**
 * Builds a hash link; empty query values are dropped so the URL stays clean.
 * @param {string[]} segments
 * @param {Record<string, string | null | undefined>} [params]
 */
export function hashLink(segments, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const text = q.toString();
  return `#/${segments.map(encodeURIComponent).join('/')}${text ? `?${text}` : ''}`;
}

/** Link to a run's detail page. @param {{source: string, run: string}} id */
export function runLink(id) {
  return hashLink(['runs', id.source, id.run]);
}
