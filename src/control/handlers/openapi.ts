// GET /v1/openapi.json: the OpenAPI 3.1 document, with this server's real URL first in `servers`.
import { readFileSync } from 'node:fs';
import { json } from '../../http/respond.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';
import { buildOpenapi } from '../openapi.ts';

let cached: Record<string, unknown> | undefined;

function document(): Record<string, unknown> {
  if (!cached) {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
    cached = buildOpenapi(pkg.version);
  }
  return cached;
}

export const getOpenapi: Handler<ControlDeps> = (ctx) => {
  const doc = document();
  const url = ctx.deps.url();
  const servers = doc.servers as Array<Record<string, string>>;
  return json(200, url ? { ...doc, servers: [{ url, description: 'this Control Plane' }, ...servers.filter((s) => s.url !== url)] } : doc);
};
