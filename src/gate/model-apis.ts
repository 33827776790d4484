// The model APIs the gate holds keys for (docs/gate.md "Modes"): where each lives, the header and variables of its
// key; the agent's CLI gets a placeholder and the gate's address.
import { isIP } from 'node:net';
import { orNull } from '../spawn/tree.ts';
import { tryParseJson } from '../untrusted.ts';
import { canonicalAddress, formatDestination, parseAuthority, refusedRange, type Destination } from './address.ts';
import { GatePolicyError, parseHostPattern, type HostPattern, type Resolver } from './policy.ts';

interface ModelApi {
  base: string;
  /** Header that carries the key; its value is `prefix + key`. */
  header: string;
  prefix: string;
  /** Environment variables holding the key, first found wins: the API's own, then a CLI's own name for it, which the
   * agent's environment would pass on by the CLI's prefix (spawn/start.ts) unless the gate holds it too. */
  env: readonly string[];
  /** What the agent's environment gets instead of the key. */
  placeholder: string;
  /** Moves the upstream for svc; the API's CLI reads it too, so in the agent's environment it names the gate. */
  baseEnv?: string;
}

const bearer = (base: string, env: string[]): ModelApi => ({
  base, header: 'authorization', prefix: 'Bearer ', env, placeholder: 'svc-gate-placeholder',
});

/** opencode's providers are rows here too: adding one is one line. */
export const MODEL_APIS: Readonly<Record<string, ModelApi>> = {
  anthropic: {
    base: 'https://api.anthropic.com', header: 'x-api-key', prefix: '',
    env: ['ANTHROPIC_API_KEY', 'AIDER_ANTHROPIC_API_KEY'], placeholder: 'sk-ant-svc-gate-placeholder',
    baseEnv: 'ANTHROPIC_BASE_URL',
  },
  // The OpenAI convention puts /v1 in the base URL; its CLIs append /responses or /chat/completions to it.
  openai: {
    ...bearer('https://api.openai.com/v1', ['OPENAI_API_KEY', 'CODEX_API_KEY', 'AIDER_OPENAI_API_KEY']),
    placeholder: 'sk-svc-gate-placeholder', baseEnv: 'OPENAI_BASE_URL',
  },
  gemini: {
    base: 'https://generativelanguage.googleapis.com', header: 'x-goog-api-key', prefix: '',
    env: ['GEMINI_API_KEY', 'GOOGLE_API_KEY'], placeholder: 'svc-gate-placeholder', baseEnv: 'GOOGLE_GEMINI_BASE_URL',
  },
  openrouter: bearer('https://openrouter.ai', ['OPENROUTER_API_KEY']),
  groq: bearer('https://api.groq.com', ['GROQ_API_KEY']),
  mistral: bearer('https://api.mistral.ai', ['MISTRAL_API_KEY']),
  deepseek: bearer('https://api.deepseek.com', ['DEEPSEEK_API_KEY']),
  xai: bearer('https://api.x.ai', ['XAI_API_KEY']),
};

/** Headers a client might carry a credential in; all are dropped before the real one is added. */
export const CREDENTIAL_HEADERS: readonly string[] = [
  'authorization', 'proxy-authorization', 'x-api-key', 'x-goog-api-key', 'api-key', 'cookie',
];

export interface ModelRoute {
  name: string;
  /** Its host and port go through the policy and address rules like any destination. */
  base: URL;
  header: string;
  value: string;
}

/** aider's key list: its `--api-key PROVIDER=KEY`, each entry setting `<PROVIDER>_API_KEY` for aider. */
export const AIDER_KEY_LIST = 'AIDER_API_KEY';

/** Every variable the gate reads a model key from. */
export const MODEL_KEY_NAMES: readonly string[] =
  [...Object.values(MODEL_APIS).flatMap((api) => api.env), AIDER_KEY_LIST];

/** An entry of aider's key list, with the API whose row names the variable it sets, if any. */
export interface ListedKey { provider: string; key: string; api: string | undefined }

/** aider's key list in `env` as aider reads it (ConfigArgParse: one entry, or a list in brackets, JSON or split at
 * commas), or null when unset or not such a list (then it stays out whole). */
export function aiderKeyList(env: Readonly<Record<string, string | undefined>>): ListedKey[] | null {
  const value = env[AIDER_KEY_LIST];
  if (!value) return null;
  const bracketed = value.startsWith('[') && value.endsWith(']');
  const items: unknown = bracketed ? tryParseJson(value) ?? value.slice(1, -1).split(',') : [value];
  if (!Array.isArray(items)) return null;
  const entries: ListedKey[] = [];
  for (const item of items) {
    const at = typeof item === 'string' ? item.indexOf('=') : -1;
    if (typeof item !== 'string' || at < 0) return null;
    const provider = item.slice(0, at).trim();
    const variable = /^\w+$/.test(provider) ? `${provider.toUpperCase()}_API_KEY` : '';
    const api = Object.keys(MODEL_APIS).find((name) => MODEL_APIS[name]!.env.includes(variable));
    entries.push({ provider, key: item.slice(at + 1).trim(), api });
  }
  return entries;
}

/** A route for each API whose key is in `env`, to the operator's `baseEnv` if set: the first variable of its row that
 * is set, else its last entry in aider's key list. */
export function modelRoutesFromEnv(env: Readonly<Record<string, string | undefined>>): ModelRoute[] {
  const routes: ModelRoute[] = [];
  const listed = aiderKeyList(env) ?? [];
  for (const [name, api] of Object.entries(MODEL_APIS)) {
    // aider sets its entries in order, so a later one for the same variable wins.
    const key = api.env.map((v) => env[v]).find((v) => v !== undefined && v !== '') ??
      listed.findLast((e) => e.api === name && e.key !== '')?.key;
    if (key === undefined) continue;
    const base = (api.baseEnv && env[api.baseEnv]) || api.base;
    routes.push(modelRoute(name, base, api.header, api.prefix + key));
  }
  return routes;
}

/** Where `route` sends its calls: its base's host and port, as a request names them. */
export function routeDestination(route: ModelRoute): Destination {
  return parseAuthority(route.base.host, route.base.protocol === 'https:' ? 443 : 80);
}

/** Each route's upstream, exactly (a name only with its port), as a policy's allow entry. */
export function routeOrigins(routes: readonly ModelRoute[]): HostPattern[] {
  return routes.map((route) => {
    const own = routeDestination(route);
    return parseHostPattern(formatDestination(own.host, own.port));
  });
}

/** The route a tunnel to `dest` would reach: a tunnel there would carry calls with that API's key (or a login of the
 * CLI's own) that the gate can neither meter nor hold to a budget, so it is refused while the gate holds the key
 * (docs/gate.md "The model CLIs and the gate"). A named API host on any port; a literal-address route at its port. */
export function routeAt(models: ReadonlyMap<string, ModelRoute>, dest: Destination): ModelRoute | undefined {
  for (const route of models.values()) {
    const own = routeDestination(route);
    if (own.host === dest.host && (!own.literal || own.port === dest.port)) return route;
  }
  return undefined;
}

/** The route whose upstream, as `resolve` answers now, is `address` at `port`: the same server as an address literal
 * (tunnel.ts asks only for literals). A route whose host does not resolve is reached by nothing. */
export async function routeAtAddress(
  models: ReadonlyMap<string, ModelRoute>, address: string, port: number, resolve: Resolver,
): Promise<ModelRoute | undefined> {
  const wanted = canonicalAddress(address);
  for (const route of models.values()) {
    const own = routeDestination(route);
    if (own.port !== port) continue;
    const addresses = own.literal ? [own.host] : await resolve(own.host).catch(() => []);
    if (addresses.some((a) => canonicalAddress(a) === wanted)) return route;
  }
  return undefined;
}

/** One route: https, or plain http only to a loopback IP literal (a key never crosses a network in clear). */
export function modelRoute(name: string, base: string, header: string, value: string): ModelRoute {
  if (!/^[a-z0-9][a-z0-9-]{0,40}$/.test(name)) throw new GatePolicyError(name, 'is not a model API name');
  const url = URL.parse(base);
  if (!url) throw new GatePolicyError(base, 'is not a URL');
  if (url.username || url.password || url.search || url.hash) {
    throw new GatePolicyError(base, 'a model API base is an origin with an optional path');
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const loopback = isIP(host) !== 0 && (refusedRange(host) ?? '').includes('loopback');
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw new GatePolicyError(base, 'a model API is reached over https (plain http only to a loopback address)');
  }
  return { name, base: url, header: header.toLowerCase(), value };
}

// The upstream path of `/_model/<api>/<rest>` (docs/gate.md "Modes"): dot segments resolved in every spelling the
// destination might decode, refused when they climb out of the base; escapes that could make a server see another
// path than the gate did are refused outright.

const BAD_RAW = /[\\\x00-\x20\x7f#]/;
// An encoded slash or backslash, %25 (a second decoding), %3b (`..%3b` is a dot segment to a servlet), controls.
const BAD_ESCAPE = /%(2f|5c|25|3b|[01][0-9a-f]|7f)/i;
const BROKEN_ESCAPE = /%(?![0-9a-f]{2})/i;

/** `rest` is what follows `/_model/<api>`: empty, `/…` or `?…`. */
export function modelPath(basePath: string, rest: string): { path: string; endpoint: string } | { refused: string } {
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
    if (segment === '..') {
      if (stack.length <= base.length) return { refused: "the model API path leaves the API's base" };
      stack.pop();
    }
    if (segment !== '.' && segment !== '..') stack.push(segment);
    else if (last) stack.push('');
  }
  // Checked as the API will read it (`%62atches` is `batches` there); an escape that is no UTF-8 is refused too.
  const readAs: string[] = [];
  for (const segment of stack.slice(base.length)) {
    let decoded = orNull(() => decodeURIComponent(segment));
    // `x:countTokens;:generateContent` is one method to the gate and maybe another to the API: refused, not guessed.
    if (decoded !== null && decoded.includes(';') && decoded.includes(':')) {
      return { refused: `the model API path segment "${segment.slice(0, 60)}" holds both ";" and ":"` };
    }
    decoded = decoded?.replace(/;.*$/s, '').replace(/[.\s]+$/, '') ?? null;
    if (decoded === null || UNMETERED.test(decoded)) {
      return { refused: `the model API endpoint "${segment.slice(0, 60)}" is not one the gate can meter` };
    }
    if (decoded !== '') readAs.push(decoded);
  }
  return { path: `/${stack.join('/')}${query}`, endpoint: `/${[...base, ...readAs].join('/')}` };
}

// Endpoints whose cost is not in their answer (batches, fine-tunes, stores, media): an agent could spend past every
// budget in one call. Coding CLIs call none of them. OpenAI's `conversations` stores input a later call continues,
// which its request's bytes do not show (a `previous_response_id` cannot be refused so: usage.ts doubts its bound).
const UNMETERED = new RegExp('^(batch|batches|fine_tuning|fine-tunes|files|uploads|vector_stores|realtime|images|' +
  'audio|videos|threads|evals|containers|conversations|cachedContents|tunedModels|fileSearchStores)$|' +
  ':(batchGenerateContent|asyncBatchEmbedContent|predict|predictLongRunning)$', 'i');

/** Calls that cost nothing and answer no usage: listing or reading models, and counting tokens; only when both the raw
 * path (less its query) and the endpoint as the API reads it (`endpoint` of modelPath) say so, since a server may read
 * either (`…:generateContent;:countTokens` generates, so may `…:countTokens;:streamGenerateContent`). */
export function freeEndpoint(method: string, path: string, endpoint: string): boolean {
  const raw = path.split('?')[0]!;
  if (/(\/count_tokens|:countTokens)$/.test(endpoint) && /(\/count_tokens|:countTokens)$/.test(raw)) return true;
  const models = /\/models(\/[^/:]+)?$/;
  return (method === 'GET' || method === 'HEAD') && models.test(endpoint) && models.test(raw.replace(/\/$/, ''));
}

// The calls that generate, and so cost what their output may be (docs/gate.md "Metered cost"): each family's.
const GENERATION = new RegExp('(/messages|/chat/completions|/responses|/responses/compact|/completions|' +
  ':generateContent|:streamGenerateContent)$', 'i');

/** Whether a call generates output: any method but GET or HEAD (a server may take another for POST) to one of
 * GENERATION's endpoints, its path (`endpoint` of modelPath) as the API reads it. A call cut before its usage came is
 * counted at its bounds only then (any other is $0). */
export function generationEndpoint(method: string, endpoint: string): boolean {
  return method !== 'GET' && method !== 'HEAD' && GENERATION.test(endpoint);
}
