// Serves a file recorded for a run. The path only ever selects a DB row (never the filesystem), and the response is
// locked down so an HTML or SVG artifact can never run script in the Control Plane's origin.
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import { matchesEtag } from '../../http/respond.ts';
import type { ControlDeps } from '../deps.ts';
import { checkArtifactPath, runParams } from '../params.ts';
import { safeContentType } from '../ingest-validate.ts';

// `sandbox` without allow-scripts/allow-same-origin gives the document an opaque origin and no script at all.
const ARTIFACT_CSP = "default-src 'none'; sandbox";

function attachmentDisposition(path: string): string {
  const name = path.slice(path.lastIndexOf('/') + 1);
  const ascii = name.replace(/[^A-Za-z0-9._-]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/**
 * A type a page could load as script or style is served as plain text: a subresource ignores the disposition and the
 * sandbox CSP, and only its type (with nosniff) keeps it from running. Text and JSON show inline.
 */
function served(stored: string): { type: string; inline: boolean } {
  const base = stored.split(';')[0]!.trim().toLowerCase();
  if (base.includes('script') || base === 'text/css') return { type: 'text/plain; charset=utf-8', inline: true };
  return { type: stored, inline: base.startsWith('text/') || base === 'application/json' || base.endsWith('+json') };
}

export const getArtifact: Handler<ControlDeps> = (ctx) => {
  const { source, run } = runParams(ctx);
  const path = checkArtifactPath(ctx.params.path ?? '');
  const row = ctx.deps.stores.artifacts.get(source, run, path);
  if (!row) throw new HttpError('not_found', `Artifact "${path}" of run ${source}/${run} not found`);
  const etag = `"${row.sha256}"`;
  const { type, inline } = served(safeContentType(row.content_type));
  const headers: Record<string, string> = {
    etag,
    // Agent-made content with the run's access rules: no browser or proxy may keep a copy (not even to revalidate).
    'cache-control': 'no-store',
    'content-security-policy': ARTIFACT_CSP,
    'x-content-type-options': 'nosniff',
    'content-type': type,
    'content-disposition': inline ? 'inline' : attachmentDisposition(path),
  };
  if (matchesEtag(ctx.req.headers['if-none-match'], etag)) return { status: 304, headers };
  const body = Buffer.from(row.content.buffer, row.content.byteOffset, row.content.byteLength);
  return { status: 200, headers, body };
};
