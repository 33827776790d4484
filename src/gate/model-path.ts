// The path a `/_model/<api>/<rest>` request reaches upstream: the API's base path plus `rest`, with dot segments
// resolved here (RFC 3986 §5.2.4) in every spelling the destination might decode — raw, percent-encoded — and
// refused when they climb out of the base. Escapes that would let a server see a different path than the gate did
// (an encoded slash, backslash, percent or control byte) are refused outright; model API paths never need them.

export type ModelPath = { path: string } | { refused: string };

const BAD_RAW = /[\\\x00-\x20\x7f#]/;
// %2f / %5c (a slash the server may decode), %25 (a second round of decoding), %3b (`..%3b` is `..;`, a dot segment
// to a servlet container once decoded), controls.
const BAD_ESCAPE = /%(2f|5c|25|3b|[01][0-9a-f]|7f)/i;
const BROKEN_ESCAPE = /%(?![0-9a-f]{2})/i;

/** `rest` is what follows `/_model/<api>`: empty, `/…` or `?…`. `basePath` is the route's base URL pathname. */
export function modelPath(basePath: string, rest: string): ModelPath {
  const mark = rest.indexOf('?');
  const rawPath = mark < 0 ? rest : rest.slice(0, mark);
  const query = mark < 0 ? '' : rest.slice(mark);
  if (BAD_RAW.test(rest)) return { refused: 'the model API path holds a backslash, space, control byte or "#"' };
  if (BROKEN_ESCAPE.test(rest)) return { refused: 'the model API path holds a broken %-escape' };
  if (BAD_ESCAPE.test(rawPath)) return { refused: 'the model API path holds an encoded slash, backslash, ";" or "%"' };
  const base = basePath.split('/').filter((s) => s !== '');
  const stack = [...base];
  const segments = rawPath === '' ? [] : rawPath.slice(1).split('/');
  for (const [i, raw] of segments.entries()) {
    const segment = raw.replace(/%2e/gi, '.');
    const last = i === segments.length - 1;
    // `..;x` is `..` to a servlet container; a segment of dots alone is a dot segment to someone.
    if (/^\.+(;|$)/.test(segment) && segment !== '.' && segment !== '..') {
      return { refused: `the model API path segment "${raw.slice(0, 40)}" is refused` };
    }
    if (segment === '.' || segment === '..') {
      if (segment === '..') {
        if (stack.length <= base.length) return { refused: "the model API path leaves the API's base" };
        stack.pop();
      }
      if (last) stack.push('');
      continue;
    }
    stack.push(segment);
  }
  return { path: `/${stack.join('/')}${query}` };
}
