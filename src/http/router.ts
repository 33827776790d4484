// Flat route table compiled once at boot: literal segments, `:name` and one trailing `*name`; no regex input. A table
// it cannot serve (a malformed, ambiguous or repeated pattern) is a bug in svc, a FailedError at start.
import { HttpError } from './http-error.ts';
import { FailedError } from '../errors.ts';

export type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** A literal segment's text, or a parameter's (`:name`) or the trailing tail's (`*name`) name. */
type Segment = { kind: 'literal' | 'param' | 'tail'; text: string };

interface Compiled<R> {
  pattern: string;
  segments: Segment[];
  methods: Map<string, R>;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function compilePattern(pattern: string): Segment[] {
  if (!pattern.startsWith('/')) throw new FailedError(`Route pattern must start with "/": "${pattern}"`);
  const parts = pattern.slice(1).split('/');
  return parts.map((part, index) => {
    const name = part.slice(1);
    if (part.startsWith(':')) {
      if (!NAME.test(name)) throw new FailedError(`Malformed parameter "${part}" in "${pattern}"`);
      return { kind: 'param', text: name };
    }
    if (part.startsWith('*')) {
      // Last, and after a literal or a parameter: a tail first would match "/" itself.
      if (NAME.test(name) && index === parts.length - 1 && index > 0) return { kind: 'tail', text: name };
      throw new FailedError(`Tail "${part}" must be last, after another segment, in "${pattern}"`);
    }
    if (part === '' || /[:*?#%]/.test(part)) throw new FailedError(`Malformed segment "${part}" in "${pattern}"`);
    return { kind: 'literal', text: part };
  });
}

function shapeOf(segments: Segment[]): string {
  return segments.map((s) => (s.kind === 'literal' ? s.text : s.kind === 'param' ? ':' : '*')).join('/');
}

function decodeSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new HttpError('bad_request', `Malformed percent escape in path segment "${raw}"`);
  }
}

/** The function that finds a request's route and its parameters (404 or 405 when none takes it). */
export function createRouter<R extends { method: Method; pattern: string }>(routes: readonly R[]) {
  const table: Compiled<R>[] = [];
  const byShape = new Map<string, Compiled<R>>();
  // Routes without parameters by their exact path: /health and /v1/runs are found without splitting the path.
  const literal = new Map<string, Compiled<R>>();
  for (const def of routes) {
    const segments = compilePattern(def.pattern);
    const shape = shapeOf(segments);
    let entry = byShape.get(shape);
    if (entry && entry.pattern !== def.pattern) {
      throw new FailedError(`Route "${def.pattern}" is ambiguous with "${entry.pattern}"`);
    }
    if (!entry) {
      entry = { pattern: def.pattern, segments, methods: new Map() };
      byShape.set(shape, entry);
      table.push(entry);
    }
    if (entry.methods.has(def.method)) throw new FailedError(`Duplicate route ${def.method} ${def.pattern}`);
    entry.methods.set(def.method, def);
  }
  // Literal routes win over parameter routes that would also match the same path.
  table.sort((a, b) => specificity(b.segments) - specificity(a.segments));
  for (const entry of table) {
    if (entry.segments.every((s) => s.kind === 'literal')) literal.set(entry.pattern, entry);
  }

  function found(entry: Compiled<R>, method: string, params: Record<string, string>) {
    const route = entry.methods.get(method) ?? (method === 'HEAD' ? entry.methods.get('GET') : undefined);
    if (route === undefined) {
      const allow = [...entry.methods.keys()];
      if (allow.includes('GET')) allow.push('HEAD');
      const message = `Method ${method} is not allowed on this path`;
      throw new HttpError('method_not_allowed', message, { allow: allow.join(', ') });
    }
    return { route, params };
  }

  function tryMatch(entry: Compiled<R>, parts: string[]): Record<string, string> | null {
    const params: Record<string, string> = {};
    const segs = entry.segments;
    for (let i = 0; i < segs.length; i++) {
      const seg = segs[i]!;
      if (seg.kind === 'tail') {
        if (i >= parts.length) return null;
        params[seg.text] = parts.slice(i).map(decodeSegment).join('/');
        return params;
      }
      const part = parts[i];
      if (part === undefined) return null;
      if (seg.kind === 'literal' ? part !== seg.text : part === '') return null;
      if (seg.kind === 'param') params[seg.text] = decodeSegment(part);
    }
    return parts.length === segs.length ? params : null;
  }

  function lookup(method: string, pathname: string) {
    const exact = literal.get(pathname);
    if (exact) return found(exact, method, {});
    const parts = pathname.slice(1).split('/');
    for (const entry of table) {
      const params = tryMatch(entry, parts);
      if (params) return found(entry, method, params);
    }
    return undefined;
  }

  // One rule for every route (README "Trigger server"): a path no route takes is tried once more without one
  // trailing slash, so `POST /errtrack/` is `POST /errtrack` and `GET /v1/runs/` is `GET /v1/runs`. Only after
  // a miss: an artifact path ending in "/" still reaches its own route unchanged.
  return (method: string, pathname: string) => {
    const match = lookup(method, pathname) ?? (pathname.length > 1 && pathname.endsWith('/')
      ? lookup(method, pathname.slice(0, -1))
      : undefined);
    if (match) return match;
    throw new HttpError('not_found', `No route for "${pathname}"`);
  };
}

function specificity(segments: Segment[]): number {
  let score = 0;
  for (const s of segments) score = score * 3 + (s.kind === 'literal' ? 2 : s.kind === 'param' ? 1 : 0);
  return score * 100 + segments.length;
}
