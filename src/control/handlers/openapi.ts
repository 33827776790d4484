// GET /v1/openapi.json: the OpenAPI 3.1 document, with this server's real URL first in `servers`.
import { readFileSync } from 'node:fs';
import { json } from '../../http/respond.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';
import { buildOpenapi, CONTROL_SERVER } from '../openapi.ts';

let cached: Record<string, unknown> | undefined;

function document(): Record<string, unknown> {
  if (!cached) {
    const text = readFileSync(new URL('../../../package.json', import.meta.url), 'utf8');
    const pkg = JSON.parse(text) as { version: string };
    cached = buildOpenapi(pkg.version);
  }
  return cached;
}

/** The default Control Plane entry becomes this server's own URL first, wherever servers are named. */
function withOwnUrl(servers: Array<Record<string, string>>, url: string): Array<Record<string, string>> {
  if (!servers.some((s) => s.url === CONTROL_SERVER.url)) return servers;
  return [{ url, description: 'this Control Plane' }, ...servers.filter((s) => s.url !== url)];
}

function served(doc: Record<string, unknown>, url: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
    const servers = item.servers as Array<Record<string, string>> | undefined;
    paths[path] = servers ? { ...item, servers: withOwnUrl(servers, url) } : item;
  }
  return { ...doc, servers: withOwnUrl(doc.servers as Array<Record<string, string>>, url), paths };
}

const servedCache = new Map<string, Record<string, unknown>>();

export const getOpenapi: Handler<ControlDeps> = (ctx) => {
  const doc = document();
  const url = ctx.deps.url();
  if (!url) return json(200, doc);
  let out = servedCache.get(url);
  if (!out) servedCache.set(url, (out = served(doc, url)));
  return json(200, out);
};
