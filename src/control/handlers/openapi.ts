// GET /v1/openapi.json: the OpenAPI 3.1 document, with this server's real URL first in `servers`.
import { readFileSync } from 'node:fs';
import { json } from '../../http/respond.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';
import { buildOpenapi } from '../openapi.ts';

const PACKAGE_JSON = readFileSync(new URL('../../../package.json', import.meta.url), 'utf8');
/** svc's version (package.json), as the document and the MCP server's serverInfo give it. */
export const VERSION = (JSON.parse(PACKAGE_JSON) as { version: string }).version;
/** One document per URL the server answers on, built when first asked for. */
const documents = new Map<string, Record<string, unknown>>();

export const getOpenapi: Handler<ControlDeps> = (ctx) => {
  const url = ctx.deps.url();
  let doc = documents.get(url);
  if (!doc) documents.set(url, (doc = buildOpenapi(VERSION, url)));
  return json(200, doc);
};
