// OpenTelemetry traces with svc's own code: `traceparent` (untrusted: anything malformed starts a new trace), spans,
// and an OTLP/HTTP JSON exporter off every request's path (docs/deploy.md "Traces": what it sends, and never sends).
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { list, obj, str } from './untrusted.ts';

/** Where a span sits: its trace and its own id (the parent of the spans started inside it). */
export interface SpanContext {
  traceId: string;
  spanId: string;
}

type SpanKind = 'internal' | 'server' | 'client' | 'consumer';
type AttrValue = string | number | boolean;
type Attrs = Record<string, AttrValue | null | undefined>;

export interface SpanRecord extends SpanContext {
  parentSpanId: string | null;
  name: string;
  kind: SpanKind;
  /** Unix nanoseconds as decimal strings (OTLP JSON carries 64-bit integers as strings). */
  start: string;
  end: string;
  attributes: Attrs;
  status: 'ok' | 'error' | 'unset';
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The context a `traceparent` names (version 00, ids not all zero), or null for anything else. */
export function parseTraceparent(value: unknown): SpanContext | null {
  if (typeof value !== 'string' || value.length > 128) return null;
  const m = TRACEPARENT.exec(value.trim());
  if (!m || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return null;
  return { traceId: m[1]!, spanId: m[2]! };
}

export function formatTraceparent(ctx: SpanContext): string {
  return `00-${ctx.traceId}-${ctx.spanId}-01`;
}

function nonZeroHex(bytes: number): string {
  for (;;) {
    const hex = randomBytes(bytes).toString('hex');
    if (!/^0+$/.test(hex)) return hex;
  }
}

export const newTraceId = (): string => nonZeroHex(16);
export const newSpanId = (): string => nonZeroHex(8);

export const nanos = (ms: number): string => (BigInt(Math.round(ms)) * 1_000_000n).toString();

type TraceSettings = ReturnType<typeof traceSettings>;

/** `k=v,k2=v2` (values percent-decoded, as the OpenTelemetry spec writes them); a malformed pair is skipped. */
function parseHeaders(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (text ?? '').split(',')) {
    const at = pair.indexOf('=');
    const key = pair.slice(0, at).trim();
    if (at <= 0 || !/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(key)) continue;
    try {
      out[key] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      continue;
    }
  }
  return out;
}

/** The OpenTelemetry environment variables svc follows (settings-registry.ts documents each); `url` null: no export. */
export function traceSettings(env: NodeJS.ProcessEnv, defaultService: string) {
  const service = env.OTEL_SERVICE_NAME?.trim() || defaultService;
  const headers = parseHeaders(env.OTEL_EXPORTER_OTLP_HEADERS);
  const off = env.OTEL_TRACES_EXPORTER?.trim() === 'none';
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const url = off ? null : traces || (base ? `${base.replace(/\/+$/, '')}/v1/traces` : null);
  return { url: url && /^https?:\/\//.test(url) ? url : null, service, headers };
}

function attribute(key: string, value: AttrValue) {
  if (typeof value === 'boolean') return { key, value: { boolValue: value } };
  if (typeof value === 'number' && Number.isInteger(value)) return { key, value: { intValue: String(value) } };
  if (typeof value === 'number') return { key, value: { doubleValue: value } };
  return { key, value: { stringValue: value.slice(0, 256) } };
}

const attributes = (attrs: Attrs) =>
  Object.entries(attrs).flatMap(([k, v]) => (v === null || v === undefined ? [] : [attribute(k, v)]));

const KIND = { internal: 1, server: 2, client: 3, consumer: 5 } as const;
const STATUS = { unset: 0, ok: 1, error: 2 } as const;

export function otlpBody(service: string, spans: readonly SpanRecord[]): string {
  return JSON.stringify({
    resourceSpans: [{
      resource: { attributes: attributes({ 'service.name': service }) },
      scopeSpans: [{
        scope: { name: 'svc' },
        spans: spans.map((s) => ({
          traceId: s.traceId, spanId: s.spanId, ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
          name: s.name, kind: KIND[s.kind], startTimeUnixNano: s.start, endTimeUnixNano: s.end,
          attributes: attributes(s.attributes), status: { code: STATUS[s.status] },
        })),
      }],
    }],
  });
}

const VALUE_KINDS = ['stringValue', 'intValue', 'doubleValue', 'boolValue'] as const;
const NANOS = /^\d{1,20}$/;

/** Untrusted OTLP attributes rebuilt: a string key and one scalar value each; anything else, or a `drop` key, goes. */
function checkedAttributes(value: unknown, drop: RegExp): unknown[] {
  return list(value).flatMap((a) => {
    const key = str(obj(a).key);
    const v = obj(obj(a).value);
    const kind = VALUE_KINDS.find((k) => ['string', 'number', 'boolean'].includes(typeof v[k]));
    return key === null || drop.test(key) || kind === undefined ? [] : [{ key, value: { [kind]: v[kind] } }];
  });
}

const int = (value: unknown): number => (Number.isInteger(value) ? (value as number) : 0);
const nanosOf = (value: unknown): string => (typeof value === 'string' && NANOS.test(value) ? value : '0');
const SPAN_ID = /^(?!0{16})[0-9a-f]{16}$/;
/** A pod's span attributes that say whose a span is (the gate's stamp says it), dropped; docs/deploy.md "Traces". */
const STAMPED = /^(svc\.(relayed_by|job_id|run|repo)|service\..*)$/i;

type RelayedExport = { body: string; spans: number } | { refused: string };

/**
 * A pod's OTLP JSON export rebuilt from the fields otlpBody writes, under one resource saying only `resource`
 * (docs/deploy.md "Traces"). Refused unless it has a span and every span is in `traceId` with a well-formed id that
 * `svcs` does not claim.
 */
export function ownTraceExport(
  body: unknown, traceId: string, svcs: (spanId: string) => boolean, resource: Attrs,
): RelayedExport {
  let spans = 0;
  let refused: string | null = null;
  const scopeSpans = list(obj(body).resourceSpans).flatMap((r) => list(obj(r).scopeSpans).flatMap((scope) => {
    const kept = list(obj(scope).spans).map((span) => {
      const s = obj(span);
      spans += 1;
      const id = (str(s.spanId) ?? '').toLowerCase();
      const parent = str(s.parentSpanId)?.toLowerCase() || null;
      if ((str(s.traceId) ?? '').toLowerCase() !== traceId) refused ??= 'only the job\'s own trace is relayed';
      else if (!SPAN_ID.test(id) || (parent && !SPAN_ID.test(parent))) refused ??= 'a span id is not 16 hex digits';
      else if (svcs(id)) refused ??= `span id ${id} is svc's own (the job's span or the gate's)`;
      return {
        traceId, spanId: id, ...(parent ? { parentSpanId: parent } : {}), name: str(s.name) ?? '', kind: int(s.kind),
        startTimeUnixNano: nanosOf(s.startTimeUnixNano), endTimeUnixNano: nanosOf(s.endTimeUnixNano),
        attributes: checkedAttributes(s.attributes, STAMPED), status: { code: int(obj(s.status).code) },
      };
    });
    return kept.length === 0 ? [] : [{ scope: { name: str(obj(obj(scope).scope).name) ?? '' }, spans: kept }];
  }));
  if (spans === 0) return { refused: 'the export has no span' };
  if (refused !== null) return { refused };
  const resourceSpans = [{ resource: { attributes: attributes(resource) }, scopeSpans }];
  return { body: JSON.stringify({ resourceSpans }), spans };
}

const MAX_QUEUED = 2048;
const BATCH = 512;
const DELAY_MS = 200;
const POST_TIMEOUT_MS = 10_000;
const FLUSH_MS = 5_000;

/** One process's span sink: a bounded queue sent in batches, one POST at a time. */
export class Tracer {
  /** Spans dropped: the queue was full, or their POST failed (a collector down, slow or refusing). */
  dropped = 0;
  sent = 0;
  /** Where spans go; null: nowhere (tracing is off, and svc does no trace work). */
  readonly url: string | null;
  readonly enabled: boolean;
  readonly #settings: TraceSettings;
  #queue: SpanRecord[] = [];
  #timer: NodeJS.Timeout | null = null;
  #inFlight: Promise<void> | null = null;

  constructor(settings: TraceSettings) {
    this.#settings = settings;
    this.url = settings.url;
    this.enabled = settings.url !== null;
  }

  /** Sends an export made elsewhere (a pod's, relayed by the gate) now, to this tracer's collector and headers. */
  forward(body: string): Promise<boolean> {
    return this.enabled ? post(this.#settings, body) : Promise.resolve(false);
  }

  record(span: SpanRecord): void {
    if (!this.enabled) return;
    if (this.#queue.length >= MAX_QUEUED) {
      this.dropped++;
      return;
    }
    this.#queue.push(span);
    this.#timer ??= setTimeout(() => void this.#send(), DELAY_MS).unref();
  }

  /** Sends what is queued and waits for it, at most `maxMs` (what is still queued then is dropped). Never throws. */
  async flush(maxMs = FLUSH_MS): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), maxMs).unref()));
    while (this.#inFlight || this.#queue.length > 0) {
      if (await Promise.race([this.#inFlight ?? this.#send(), late]) === 'late') {
        this.dropped += this.#queue.splice(0).length;
        break;
      }
    }
    clearTimeout(timer);
  }

  #send(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#inFlight) return this.#inFlight;
    const batch = this.#queue.splice(0, BATCH);
    if (batch.length === 0) return Promise.resolve();
    this.#inFlight = post(this.#settings, otlpBody(this.#settings.service, batch)).then((ok) => {
      if (ok) this.sent += batch.length;
      else this.dropped += batch.length;
      this.#inFlight = null;
      if (this.#queue.length > 0) this.#timer ??= setTimeout(() => void this.#send(), DELAY_MS).unref();
    });
    return this.#inFlight;
  }
}

/** One POST; true on a 2xx. Never rejects. */
function post(settings: TraceSettings, body: string): Promise<boolean> {
  return new Promise((resolve) => {
    const url = URL.parse(settings.url ?? '');
    if (!url) return resolve(false);
    // Taken when a span is sent, never imported: see test/unit/http-imports.test.ts.
    const { request: send } = process.getBuiltinModule(url.protocol === 'https:' ? 'node:https' : 'node:http');
    const req = send(url, {
      method: 'POST', timeout: POST_TIMEOUT_MS,
      headers: { ...settings.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      res.resume();
      res.on('end', () => resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300));
      res.on('error', () => resolve(false));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    // The socket must not keep a server or a worker alive: a flush waits on it explicitly.
    req.on('socket', (s) => s.unref());
    req.end(body);
  });
}

/** A span being timed: ended once, then queued on its tracer. */
export class OpenSpan {
  readonly context: SpanContext;
  readonly #record: SpanRecord;
  readonly #tracer: Tracer;
  #ended = false;

  constructor(tracer: Tracer, name: string, parent: SpanContext | null, o: SpanOptions = {}) {
    this.#tracer = tracer;
    this.context = { traceId: parent?.traceId ?? newTraceId(), spanId: o.spanId ?? newSpanId() };
    this.#record = {
      ...this.context, parentSpanId: parent?.spanId || null, name, kind: o.kind ?? 'internal',
      start: nanos(o.startMs ?? Date.now()), end: '', attributes: { ...o.attributes }, status: 'unset',
    };
  }

  end(status: 'ok' | 'error' | 'unset' = 'unset', attrs: Attrs = {}, endMs = Date.now()): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#tracer.record({ ...this.#record, attributes: { ...this.#record.attributes, ...attrs }, end: nanos(endMs),
      status });
  }
}

interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attrs;
  startMs?: number;
  /** An id given out before the span starts (a job's, stored with it). */
  spanId?: string;
}

/** The span `inSpan` nests under, and the outermost one (a run's), which `traceRoot` gives out. */
const current = new AsyncLocalStorage<{ tracer: Tracer; span: SpanContext; root: SpanContext }>();

/** Runs `fn` with `span` as the parent of every `inSpan` inside it. */
export function withSpan<T>(tracer: Tracer, span: SpanContext, fn: () => T): T {
  return current.run({ tracer, span, root: current.getStore()?.root ?? span }, fn);
}

/** The current trace's tracer and outermost span (a run's): what a run's egress gate records its connections under. */
export function traceRoot(): { tracer: Tracer; parent: SpanContext } | null {
  const store = current.getStore();
  return store ? { tracer: store.tracer, parent: store.root } : null;
}

/** `fn` inside a child span of the current one (outside any, just `fn`), ended with `fn`'s outcome. */
export async function inSpan<T>(name: string, attrs: Attrs, fn: () => Promise<T> | T): Promise<T> {
  const parent = current.getStore();
  if (!parent) return await fn();
  const span = new OpenSpan(parent.tracer, name, parent.span, { attributes: attrs });
  try {
    const result = await withSpan(parent.tracer, span.context, fn);
    span.end('ok');
    return result;
  } catch (err) {
    span.end('error');
    throw err;
  }
}
