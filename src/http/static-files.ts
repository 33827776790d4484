// Serves only the files found under the static root at boot: no path from a request ever reaches the filesystem.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, extname, relative, sep } from 'node:path';
import { hash } from 'node:crypto';
import { matchesEtag, type Reply } from './respond.ts';

/** Content types by extension: of the UI's files, and of the run files an import or a runner ships. */
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.ico': 'image/x-icon',
  '.pdf': 'application/pdf',
  '.json': 'application/json; charset=utf-8',
  '.jsonl': 'application/x-ndjson; charset=utf-8',
  '.xml': 'application/xml',
  '.txt': 'text/plain; charset=utf-8',
  '.log': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.diff': 'text/x-diff; charset=utf-8',
  '.patch': 'text/x-diff; charset=utf-8',
  '.csv': 'text/csv; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
};

/** What a file of no known type is stored and served as (an import or a runner's artifact). */
export const OCTET_STREAM = 'application/octet-stream';

export function contentTypeOf(name: string): string | undefined {
  return TYPES[extname(name).toLowerCase()];
}

export const UI_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

export type StaticFiles = ReturnType<typeof createStaticFiles>;

type StaticFile = { body: Buffer; type: string; etag: string };

function add(out: Map<string, StaticFile>, pathname: string, body: Buffer, type: string): void {
  const etag = `"${hash('sha256', body, 'hex').slice(0, 32)}"`;
  out.set(pathname, { body, type, etag });
}

// By hand: readdirSync's own recursion follows symlinked folders, and one unreadable entry would lose them all.
function walk(root: string, dir: string, out: Map<string, StaticFile>): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.')) continue;
    const full = join(dir, entry.name);
    const type = contentTypeOf(entry.name);
    if (entry.isDirectory()) walk(root, full, out);
    else if (entry.isFile() && type) {
      add(out, `/${relative(root, full).split(sep).join('/')}`, readFileSync(full), type);
    }
  }
}

/**
 * The reply for a URL path, or null when no such file was found under `root` at boot. `modules` are JavaScript
 * modules served beside those files (path → text), made by the caller at boot.
 */
export function createStaticFiles(
  root: string, modules: Record<string, Buffer> = {},
): (pathname: string, ifNoneMatch?: string) => Reply | null {
  const files = new Map<string, StaticFile>();
  try {
    if (statSync(root).isDirectory()) walk(root, root, files);
  } catch {
    // No static folder: the API still works; the UI answers 404.
  }
  for (const [pathname, body] of Object.entries(modules)) add(files, pathname, body, TYPES['.js']!);
  return (pathname, ifNoneMatch) => {
    const file = files.get(pathname === '/' ? '/index.html' : pathname);
    if (!file) return null;
    const headers: Record<string, string> = {
      'content-type': file.type,
      etag: file.etag,
      'cache-control': 'no-cache',
      'content-security-policy': UI_CSP,
      'x-frame-options': 'DENY',
    };
    if (matchesEtag(ifNoneMatch, file.etag)) return { status: 304, headers };
    return { status: 200, headers, body: file.body };
  };
}
