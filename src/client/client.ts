// Typed client for the Control Plane /v1 API (DESIGN §4) over global fetch; published as `svc/client`.
// Must not import node:sqlite or anything server-side: Node programs use it with no other part of svc.
import type {
  Artifact, ConfigDocument, IngestBatch, IngestResult, JsonObject, Page, PageQuery, Provider, ReviewRisk,
  Run, RunEvent, RunFilter, RunRef, StartRequest, StatsFilter, StreamMessage,
} from './types.ts';
import { createSseParser } from './sse-parse.ts';

export type * from './types.ts';

/** src/http/http-error.ts ERROR_FIELD_HEADER (src/client imports nothing server-side). */
const ERROR_FIELD_HEADER = 'svc-error-field';

/** The one error a client call throws, from the server's {"error":{"code","message"}} envelope. */
export class ControlApiError extends Error {
  readonly status: number;
  readonly code: string;
  /** The request field the server named (a setting's key for PUT /v1/config), or null when it named none. */
  readonly field: string | null;

  /**
   * status 0 with code "unreachable" means no HTTP answer at all (refused, DNS, timeout); code "bad_response", a 2xx
   * whose body was cut short or is not JSON (a proxy's page); code "redirected", a 3xx (never followed).
   * `options.cause`: for "unreachable", fetch's own error.
   */
  constructor(status: number, code: string, message: string, field: string | null = null, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ControlApiError';
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/** JSON text parsed, else the text itself (an SSE data field, a proxy's HTML error page). */
function parsedOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** What fetch's error says went wrong: undici's TypeError carries the socket's error as its cause. */
export function causeOf(err: unknown): string {
  return err instanceof Error ? ((err.cause as Error | undefined)?.message ?? err.message) : String(err);
}

/** The error of a non-2xx response, also from proxies that answer with HTML or nothing. */
async function errorFromResponse(res: Response): Promise<ControlApiError> {
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel().catch(() => {});
    return new ControlApiError(res.status, 'redirected',
      `HTTP ${res.status}, a redirect: svc sends its token and body only to the address it was given`);
  }
  const field = res.headers.get(ERROR_FIELD_HEADER);
  const body = parsedOr(await res.text().catch(() => '')) as { error?: { code?: unknown; message?: unknown } } | null;
  const error = body?.error;
  if (typeof error?.code === 'string' && typeof error.message === 'string') {
    return new ControlApiError(res.status, error.code, error.message, field);
  }
  return new ControlApiError(res.status, 'http_error', `HTTP ${res.status} ${res.statusText}`.trim(), field);
}

export interface StreamOptions {
  /** Resume after this event id (sent as Last-Event-ID and ?after=). */
  after?: number | string;
  signal?: AbortSignal;
}

interface Call {
  method?: string;
  /** Query parameters; undefined, null and '' are left out. */
  query?: object;
  body?: unknown;
  headers?: Record<string, string>;
  /** Ends the call early as well as its timeout does (a worker's last ship, which has a budget of its own). */
  signal?: AbortSignal;
}

export function createControlClient(options: {
  /** Base URL, e.g. http://127.0.0.1:47821 (no /v1). */
  url: string;
  /** Sent as `Authorization: Bearer <token>`; never put in URLs or errors. */
  token?: string | undefined;
  /** Per-request timeout for non-streaming calls (default 30 s). */
  timeoutMs?: number;
}) {
  const base = options.url.replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 30_000;

  function url(path: string, query: object = {}): string {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
    const qs = params.toString();
    return `${base}${path}${qs ? `?${qs}` : ''}`;
  }

  async function send(path: string, call: Call, signal?: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/json', ...call.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    // Never followed: a redirect would carry the token (same origin) or the body (any) where it points (DESIGN §7a).
    const init: RequestInit = { method: call.method ?? 'GET', headers, redirect: 'manual' };
    const timeout = () => AbortSignal.timeout(timeoutMs);
    init.signal = signal ?? (call.signal ? AbortSignal.any([call.signal, timeout()]) : timeout());
    if (call.body !== undefined) {
      init.body = JSON.stringify(call.body);
      headers['content-type'] = 'application/json';
    }
    let res: Response;
    try {
      res = await fetch(url(path, call.query), init);
    } catch (err) {
      if (signal?.aborted || call.signal?.aborted) throw err;
      const message = `Cannot reach the Control Plane at ${base} (${causeOf(err)})`;
      throw new ControlApiError(0, 'unreachable', message, null, { cause: err });
    }
    if (!res.ok) throw await errorFromResponse(res);
    return res;
  }

  /** The connection ended (or timed out) part way through a body or a stream: no answer to act on. */
  function cutShort(res: Response, err: unknown): ControlApiError {
    const message = `The Control Plane at ${base} did not send its whole answer (${causeOf(err)})`;
    return new ControlApiError(res.status, 'bad_response', message);
  }

  async function call<T>(path: string, c: Call = {}): Promise<T> {
    const res = await send(path, c);
    const text = await res.text().catch((err: unknown) => {
      throw cutShort(res, err);
    });
    if (!text) return null as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      // A proxy or captive portal answering 2xx with its own page: still the one error a call throws.
      const type = res.headers.get('content-type') ?? 'no content type';
      throw new ControlApiError(res.status, 'bad_response',
        `The Control Plane at ${base} answered ${res.status} with something that is not JSON (${type})`);
    }
  }

  function runPath(ref: RunRef, tail = ''): string {
    return `/v1/runs/${encodeURIComponent(ref.source)}/${encodeURIComponent(ref.run)}${tail}`;
  }

  function action(name: string) {
    return (ref: RunRef): Promise<Run> => call<Run>(runPath(ref, `/${name}`), { method: 'POST', body: {} });
  }

  async function* stream(path: string, opts: StreamOptions = {}): AsyncGenerator<StreamMessage> {
    const extra: Record<string, string> = { accept: 'text/event-stream' };
    if (opts.after !== undefined) extra['last-event-id'] = String(opts.after);
    const signal = opts.signal ?? new AbortController().signal;
    const res = await send(path, { headers: extra, query: { after: opts.after } }, signal);
    if (!res.body) return;
    try {
      yield* readSse(res.body as unknown as AsyncIterable<Uint8Array>);
    } catch (err) {
      // The caller aborting is how a stream ends on purpose: finish quietly.
      if (opts.signal?.aborted) return;
      throw cutShort(res, err);
    } finally {
      await res.body.cancel().catch(() => {});
    }
  }

  return {
    url: base,
    health: () => call<JsonObject>('/health'),
    ready: () => call<JsonObject>('/ready'),
    openapi: () => call<JsonObject>('/v1/openapi.json'),
    listRuns: (filter: RunFilter = {}) => call<Page<Run>>('/v1/runs', { query: filter }),
    getRun: (ref: RunRef) => call<Run>(runPath(ref)),
    deleteRun: (ref: RunRef) => call<{ deleted: boolean }>(runPath(ref), { method: 'DELETE' }),
    start: (request: StartRequest) => call<Run>('/v1/start', { method: 'POST', body: request }),
    stop: action('stop'),
    resume: action('resume'),
    retry: action('retry'),
    verify: action('verify'),
    pr: action('pr'),
    // `origin`: who the answer came from where the job was asked (the trigger server relays it); absent: the caller's.
    answer: (ref: RunRef, answer: string, origin?: string) => call<Run>(runPath(ref, '/answer'),
      { method: 'POST', body: origin === undefined ? { answer } : { answer, origin } }),
    events: (ref: RunRef, query: { after?: number; limit?: number } = {}) =>
      call<Page<RunEvent>>(runPath(ref, '/events'), { query }),
    async artifact(ref: RunRef, path: string): Promise<Artifact> {
      const encoded = path.split('/').map(encodeURIComponent).join('/');
      const res = await send(runPath(ref, `/artifact/${encoded}`), { headers: { accept: '*/*' } });
      return {
        contentType: res.headers.get('content-type') ?? 'application/octet-stream',
        etag: res.headers.get('etag'),
        body: new Uint8Array(await res.arrayBuffer().catch((err: unknown) => {
          throw cutShort(res, err);
        })),
      };
    },
    stats: (filter: StatsFilter = {}) => call<JsonObject>('/v1/stats', { query: filter }),
    costStats: (filter: StatsFilter = {}) => call<JsonObject>('/v1/stats/cost', { query: filter }),
    audit: (query: PageQuery = {}) => call<Page<JsonObject>>('/v1/audit', { query }),
    getConfig: () => call<ConfigDocument>('/v1/config'),
    putConfig: (config: Record<string, unknown>, opts: { ifMatch?: number } = {}) =>
      call<ConfigDocument>('/v1/config', {
        method: 'PUT',
        body: { config },
        ...(opts.ifMatch !== undefined ? { headers: { 'if-match': String(opts.ifMatch) } } : {}),
      }),
    providers: () => call<Provider[]>('/v1/providers'),
    integrations: () => call<JsonObject>('/v1/integrations'),
    notifications: (query: PageQuery = {}) => call<Page<JsonObject>>('/v1/notifications', { query }),
    mergeQueue: () => call<JsonObject>('/v1/merge/queue'),
    addToMergeQueue: (ref: RunRef) =>
      call<JsonObject>('/v1/merge/queue', { method: 'POST', body: { source: ref.source, run: ref.run } }),
    runMergeQueue: () => call<JsonObject>('/v1/merge/run', { method: 'POST', body: {} }),
    reviewRisk: (ref: RunRef) => call<ReviewRisk>('/v1/review/risk', { query: { source: ref.source, run: ref.run } }),
    keys: () => call<JsonObject>('/v1/keys'),
    repos: () => call<JsonObject>('/v1/repos'),
    ingest: (batch: IngestBatch, signal?: AbortSignal) =>
      call<IngestResult>('/v1/ingest', { method: 'POST', body: batch, ...(signal ? { signal } : {}) }),
    import: (path: string) => call<JsonObject>('/v1/import', { method: 'POST', body: { path } }),
    stream,
    streamRun: (ref: RunRef, opts: StreamOptions = {}) => stream(runPath(ref, '/stream'), opts),
    streamAll: (opts: StreamOptions = {}) => stream('/v1/stream', opts),
  };
}

export type ControlClient = ReturnType<typeof createControlClient>;

/** The stream's messages, their data parsed as JSON when it is JSON. */
async function* readSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<StreamMessage> {
  // A TextDecoder drops the stream's leading BOM itself, as the spec's decoding step says.
  const decoder = new TextDecoder();
  const parser = createSseParser();
  for await (const chunk of body) {
    for (const message of parser.push(decoder.decode(chunk, { stream: true }))) {
      yield { ...message, data: parsedOr(message.data) };
    }
  }
}
