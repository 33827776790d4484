// Content types of ingested artifacts are untrusted: keep a plain `type/subtype[; params]`, else octet-stream.
const NAME = String.raw`[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}`;
const PARAM = String.raw`\s*;\s*[A-Za-z0-9_-]+=("[^"\r\n]*"|[A-Za-z0-9_.+-]+)`;
const MIME = new RegExp(String.raw`^${NAME}\/${NAME}(${PARAM})*$`);

export const OCTET_STREAM = 'application/octet-stream';

export function safeContentType(value: unknown): string {
  return typeof value === 'string' && value.length <= 200 && MIME.test(value) ? value : OCTET_STREAM;
}

const BY_EXTENSION: Record<string, string> = {
  json: 'application/json; charset=utf-8',
  jsonl: 'application/x-ndjson; charset=utf-8',
  txt: 'text/plain; charset=utf-8',
  log: 'text/plain; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  diff: 'text/x-diff; charset=utf-8',
  patch: 'text/x-diff; charset=utf-8',
  html: 'text/html; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  xml: 'application/xml',
  svg: 'image/svg+xml',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  pdf: 'application/pdf',
};

/** For files read from disk (import): a type from the extension, else octet-stream. */
export function contentTypeFor(path: string): string {
  const dot = path.lastIndexOf('.');
  return (dot >= 0 && BY_EXTENSION[path.slice(dot + 1).toLowerCase()]) || OCTET_STREAM;
}
