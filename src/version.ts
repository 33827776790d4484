// svc's version as its package.json says: what `svc --version`, the OpenAPI document and the MCP server give.
import { readFileSync } from 'node:fs';

export const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
}).version;
