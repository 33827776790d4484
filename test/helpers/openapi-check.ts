// Checks a real response against the OpenAPI document: the status must be one the operation lists (or,
// for the shared pipeline's refusals, its `default`), and a JSON body must match that response's schema. A small
// JSON Schema 2020-12 subset — exactly the keywords src/control/openapi*.ts uses; an unknown keyword is a problem, so
// the document cannot grow a keyword this checker silently ignores.
type Schema = Record<string, unknown>;
type Doc = { paths: Record<string, Record<string, any>>; components: Record<string, Record<string, any>> };

const METHODS = ['get', 'post', 'put', 'delete', 'patch'];
// The statuses the pipeline may give any route, documented once as every operation's `default` (openapi.ts ANY_ROUTE).
const DEFAULT_STATUSES = new Set([405, 408, 414, 431, 500, 503]);
const IGNORED = new Set(['description', 'examples', 'format', 'contentEncoding', 'default', 'title']);

function resolve(doc: Doc, ref: string): Schema {
  const m = /^#\/components\/(\w+)\/(\w+)$/.exec(ref);
  const target = m ? doc.components[m[1]!]?.[m[2]!] : undefined;
  if (!target) throw new Error(`dangling $ref ${ref}`);
  return target as Schema;
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function typeMatches(want: string, value: unknown): boolean {
  const got = typeOf(value);
  return want === got || (want === 'number' && got === 'integer');
}

/** Problems with `value` under `schema`, each naming where (`at`); empty when it matches. */
export function validate(doc: Doc, schema: Schema, value: unknown, at = '$'): string[] {
  const out: string[] = [];
  for (const [key, rule] of Object.entries(schema)) {
    if (IGNORED.has(key)) continue;
    switch (key) {
      case '$ref':
        out.push(...validate(doc, resolve(doc, rule as string), value, at));
        break;
      case 'allOf':
        for (const s of rule as Schema[]) out.push(...validate(doc, s, value, at));
        break;
      case 'oneOf': {
        const matching = (rule as Schema[]).filter((s) => validate(doc, s, value, at).length === 0).length;
        if (matching !== 1) out.push(`${at}: matches ${matching} of oneOf, not exactly 1`);
        break;
      }
      case 'not':
        if (validate(doc, rule as Schema, value, at).length === 0) out.push(`${at}: matches a schema it must not`);
        break;
      case 'type': {
        const types = Array.isArray(rule) ? (rule as string[]) : [rule as string];
        if (!types.some((t) => typeMatches(t, value))) out.push(`${at}: is ${typeOf(value)}, not ${types.join(' | ')}`);
        break;
      }
      case 'enum':
        if (!(rule as unknown[]).some((v) => v === value)) out.push(`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(rule)}`);
        break;
      case 'const':
        if (value !== rule) out.push(`${at}: ${JSON.stringify(value)} is not ${JSON.stringify(rule)}`);
        break;
      case 'pattern':
        if (typeof value === 'string' && !new RegExp(rule as string, 'u').test(value)) out.push(`${at}: does not match ${String(rule)}`);
        break;
      case 'minimum':
        if (typeof value === 'number' && value < (rule as number)) out.push(`${at}: ${value} < ${String(rule)}`);
        break;
      case 'maximum':
        if (typeof value === 'number' && value > (rule as number)) out.push(`${at}: ${value} > ${String(rule)}`);
        break;
      case 'maxLength':
        if (typeof value === 'string' && value.length > (rule as number)) out.push(`${at}: longer than ${String(rule)}`);
        break;
      case 'maxProperties':
        if (typeOf(value) === 'object' && Object.keys(value as object).length > (rule as number)) out.push(`${at}: more than ${String(rule)} properties`);
        break;
      case 'required':
        if (typeOf(value) === 'object') {
          for (const name of rule as string[]) if (!Object.hasOwn(value as object, name)) out.push(`${at}: missing "${name}"`);
        }
        break;
      case 'properties':
        if (typeOf(value) === 'object') {
          for (const [name, sub] of Object.entries(rule as Record<string, Schema>)) {
            if (Object.hasOwn(value as object, name)) out.push(...validate(doc, sub, (value as Record<string, unknown>)[name], `${at}.${name}`));
          }
        }
        break;
      case 'additionalProperties':
        if (typeOf(value) === 'object') {
          const known = new Set(Object.keys((schema.properties ?? {}) as object));
          for (const [name, v] of Object.entries(value as Record<string, unknown>)) {
            if (known.has(name)) continue;
            if (rule === false) out.push(`${at}: unexpected property "${name}"`);
            else if (typeof rule === 'object') out.push(...validate(doc, rule as Schema, v, `${at}.${name}`));
          }
        }
        break;
      case 'items':
        if (Array.isArray(value)) value.forEach((v, i) => out.push(...validate(doc, rule as Schema, v, `${at}[${i}]`)));
        break;
      default:
        out.push(`${at}: the checker does not know the keyword "${key}"`);
    }
  }
  return out;
}

/** The documented operation for a concrete request path, or undefined when the document has no such path. */
export function findOperation(doc: Doc, method: string, path: string): { template: string; op: any } | undefined {
  const m = method.toLowerCase() === 'head' ? 'get' : method.toLowerCase();
  const segments = path.split('?')[0]!.split('/');
  for (const [template, item] of Object.entries(doc.paths)) {
    const parts = template.split('/');
    const tail = parts[parts.length - 1] === '{path}';
    if (tail ? segments.length < parts.length : segments.length !== parts.length) continue;
    const ok = parts.every((p, i) => (p.startsWith('{') ? segments[i] !== '' : p === segments[i]));
    if (ok && METHODS.includes(m) && item[m]) return { template, op: item[m] };
  }
  return undefined;
}

export interface CheckedResponse {
  method: string;
  path: string;
  status: number;
  contentType: string | null;
  /** The parsed JSON body, or undefined for a body that is not JSON (or none). */
  json: unknown;
}

/** Problems with a real response under the document; empty when it says exactly what the server did. */
export function checkResponse(doc: Doc, r: CheckedResponse): string[] {
  const found = findOperation(doc, r.method, r.path);
  if (!found) return [];
  const label = `${r.method} ${found.template} → ${r.status}`;
  let response = found.op.responses[String(r.status)];
  if (!response && DEFAULT_STATUSES.has(r.status)) response = found.op.responses.default;
  if (!response) return [`${label}: status not documented (documented: ${Object.keys(found.op.responses).join(', ')})`];
  if (response.$ref) response = resolve(doc, response.$ref);
  const content = (response.content ?? {}) as Record<string, { schema?: Schema }>;
  const type = (r.contentType ?? '').split(';')[0]!.trim();
  if (r.method.toUpperCase() === 'HEAD' || r.status === 304 || (type === '' && Object.keys(content).length === 0)) return [];
  const media = content[type] ?? content['*/*'];
  if (!media) return [`${label}: content type "${type}" not documented (documented: ${Object.keys(content).join(', ')})`];
  if (!media.schema || type !== 'application/json') return [];
  if (r.json === undefined) return [`${label}: body is not JSON`];
  return validate(doc, media.schema, r.json).map((p) => `${label}: ${p}`);
}
