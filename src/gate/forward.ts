// The gate's HTTP requests (docs/gate.md "Modes"): absolute-form plain HTTP and the model API mode (the real key in
// place of any credential the client sent), each restated on a connection of its own; bodies stream, never buffered.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect as tlsConnect } from 'node:tls';
import { Transform, type Duplex, type TransformCallback } from 'node:stream';
import { BadHostError, parseAuthority, type Destination } from './address.ts';
import { decide } from './policy.ts';
import { gateSpanId, refuse, type Asker, type GateContext } from './context.ts';
import { CREDENTIAL_HEADERS, freeEndpoint, generationEndpoint, modelPath, routeDestination } from './model-apis.ts';
import { arrivingRecord, type EgressRecord } from './evidence.ts';
import { requestMeter } from './request-meter.ts';
import { unansweredCall, usageMeter, type UsageMeter } from './usage.ts';
import { formatTraceparent, ownTraceExport, parseTraceparent } from '../trace.ts';
import { MiB, parseJson, readBody } from '../http/body.ts';
import { HttpError } from '../http/http-error.ts';
import { errorMessage } from '../errors.ts';

// node:http as CommonJS, not an ESM import: see test/unit/http-imports.test.ts.
const { request: httpRequest } = process.getBuiltinModule('node:http');

// RFC 9110 §7.6.1: connection-specific fields are not forwarded; proxy-* are for us; host is set from the target.
const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'host',
]);
// A request's framing is the gate's own (requestFraming); the client's length never travels on. The trace context is
// the gate's too (context.ts GateTrace): a client's could name another run's trace.
const REQUEST_DROP = new Set([...HOP_BY_HOP, 'content-length', 'traceparent', 'tracestate']);
// A method override would make a server read a GET (metered as reading, $0) as the POST that generates.
const MODEL_DROP = new Set([...REQUEST_DROP, ...CREDENTIAL_HEADERS, 'x-http-method-override', 'x-method-override',
  'x-http-method']);
// Metering reads the response's usage as it passes: the gate asks for it uncompressed.
const METERED_DROP = new Set([...MODEL_DROP, 'accept-encoding']);

/** A message's raw headers without the dropped names and without any its Connection header lists. */
function keepHeaders(msg: IncomingMessage, drop: ReadonlySet<string>): string[] {
  const raw = msg.rawHeaders;
  const listed = new Set(values(raw, 'connection').flatMap((v) => v.split(',')).map((t) => t.trim().toLowerCase()));
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] ?? '').toLowerCase();
    if (!drop.has(name) && !listed.has(name)) out.push(raw[i] ?? '', raw[i + 1] ?? '');
  }
  return out;
}

// A body on a method that carries none is refused: a destination that ignored it would read it as a second request
// the gate never decided (request smuggling). CONNECT never reaches here.
const NO_BODY = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE']);

// The raw list, not headersDistinct: that one stops at 1,000 header pairs, past which a Transfer-Encoding would hide.
function values(raw: readonly string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.toLowerCase() === name) out.push(raw[i + 1] ?? '');
  return out;
}

/**
 * The framing the gate writes upstream, its own for exactly the bytes node's parser read: the header pair it adds
 * (none for a bodiless request: node then sends no length) and whether a body follows; or why it is refused.
 */
type Framing = { header: string[]; body: boolean } | { refused: string };

function requestFraming(method: string, raw: readonly string[]): Framing {
  const codings = values(raw, 'transfer-encoding');
  const lengths = values(raw, 'content-length');
  if (codings.length > 0 && lengths.length > 0) {
    return { refused: 'a request with both Transfer-Encoding and Content-Length is refused' };
  }
  if (codings.length > 0) {
    if (NO_BODY.has(method)) return { refused: `a ${method} request has no body to transfer-encode` };
    // Only plain chunked: a coding the gate would drop (gzip, chunked) changes what the destination reads.
    if (codings.length > 1 || codings[0]?.trim().toLowerCase() !== 'chunked') {
      return { refused: 'only "Transfer-Encoding: chunked" is forwarded' };
    }
    return { header: ['transfer-encoding', 'chunked'], body: true };
  }
  if (lengths.length > 1) return { refused: 'a request with more than one Content-Length is refused' };
  const text = lengths[0]?.trim() ?? '0';
  if (!/^\d{1,15}$/.test(text)) return { refused: 'the Content-Length is not a number' };
  const bytes = Number(text);
  if (bytes > 0 && NO_BODY.has(method)) return { refused: `a ${method} request with a body is refused` };
  return { header: NO_BODY.has(method) ? [] : ['content-length', String(bytes)], body: bytes > 0 };
}

interface Plan {
  dest: Destination;
  path: string;
  headers: string[];
  /** The model mode over https: the certificate must carry the destination's name. */
  https: boolean;
  /** The model route's name, in the model mode. */
  model: string | null;
  /** The path as the model API reads it (model-apis.ts modelPath), in the model mode: it picks the usage reader. */
  endpoint: string;
  metered: boolean;
  /** A metered call that generates output (model-apis.ts generationEndpoint): one cut short counts at its bounds. */
  generation: boolean;
}

/** One request of an admitted client; `url` is the target without a `/_job/<credential>` prefix. */
export async function handleRequest(
  ctx: GateContext, asker: Asker, url: string, req: IncomingMessage, res: ServerResponse,
): Promise<void> {
  if (url === '/_traces') return relayTraces(ctx, asker, req, res);
  const base = arrivingRecord(url.startsWith('/_model/') ? 'model' : 'http', asker, { method: req.method ?? null });
  // A model call the meter holds (a budgeted run's calls under way) is released once, as its record is counted.
  let release = (): void => {};
  const settle = (record: EgressRecord): void => {
    ctx.record(record, asker);
    release();
  };
  const deny = (status: number, reason: string, extra: Partial<EgressRecord> = {}, headers = {}): void => {
    req.resume();
    refuse(res, status, reason, headers);
    settle({ ...base, ...extra, reason, status });
  };
  const method = req.method ?? 'GET';
  const framing = requestFraming(method, req.rawHeaders);
  if ('refused' in framing) return deny(400, framing.refused);
  let plan: Plan;
  try {
    const planned = base.kind === 'model' ? planModel(ctx, method, url, req) : planPlain(url, req);
    if ('refused' in planned) return deny(planned.status, planned.refused);
    plan = planned;
  } catch (err) {
    if (err instanceof BadHostError) return deny(400, err.message);
    throw err;
  }
  base.model = plan.model;
  const over = plan.metered ? ctx.meter?.refusal(asker) : null;
  if (over) return deny(429, over);
  const held = plan.metered ? ctx.meter?.hold?.(asker) : undefined;
  if (typeof held === 'string') return deny(429, held, {}, { 'retry-after': '1' });
  if (held) release = held;
  base.host = plan.dest.host;
  base.port = plan.dest.port;
  const decision = await decide(plan.dest, asker.policy, ctx.resolve);
  if (!decision.allowed) return deny(403, decision.reason, { rule: decision.rule, address: decision.address });
  const allowed = { ...base, decision: 'allowed' as const, rule: decision.rule, address: decision.address };
  if (req.socket.destroyed) {
    settle({ ...allowed, reason: 'client went away before the connection opened' });
    return;
  }
  plan.headers.push(...framing.header);
  // The run's trace goes on with the gate's span as the parent (a client's own traceparent was dropped).
  if (asker.span) plan.headers.push('traceparent', formatTraceparent(asker.span.context));
  try {
    send(ctx, req, res, plan, framing.body, decision.address, (extra) => settle({ ...allowed, ...extra }));
  } catch (err) {
    release();
    throw err;
  }
}

// What one job's pod may send to `/_traces` over its life (docs/gate.md "Traces"): a run exports a few dozen spans;
// these bound one that would flood the operator's collector and the gate.
const RELAY = { bytes: 16 * MiB, spans: 10_000, inFlight: 2 };
const RELAY_SPENT = `this job has sent the ${RELAY.bytes / MiB} MiB or ${RELAY.spans} spans the gate relays for a job`;

/** `POST /_job/<credential>/_traces` (docs/deploy.md#traces): a pod's span exports, sent on to the gate's own
 * collector only when every span is the job's own (ownTraceExport), recorded as kind `traces`, within RELAY. */
async function relayTraces(ctx: GateContext, asker: Asker, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const tracer = ctx.trace?.tracer;
  const base = arrivingRecord('traces', asker, { method: req.method ?? null });
  const done = (status: number, reason: string | null, extra: Partial<EgressRecord> = {}): void =>
    ctx.record({ ...base, ...extra, status, reason }, asker);
  const deny = (
    status: number, reason: string, headers: Record<string, string> = {}, extra: Partial<EgressRecord> = {},
  ): void => {
    req.resume();
    refuse(res, status, reason, headers);
    done(status, reason, extra);
  };
  const { who } = asker;
  const own = parseTraceparent(who?.trace);
  if (req.method !== 'POST') return deny(405, 'spans are exported with POST', { allow: 'POST' });
  if (!tracer || !who || !own) return deny(404, 'this gate exports no traces for this job');
  const collector = URL.parse(tracer.url ?? '');
  base.host = collector?.hostname ?? '';
  base.port = Number(collector?.port) || (collector?.protocol === 'https:' ? 443 : 80);
  const share = ctx.runs.relayShare(who.run);
  if (!share) return deny(413, 'this gate let the run go: it relays none of its spans');
  if (share.inFlight >= RELAY.inFlight) {
    return deny(429, `this job has ${share.inFlight} span exports under way already`, { 'retry-after': '1' });
  }
  if (share.bytes >= RELAY.bytes || share.spans >= RELAY.spans) return deny(413, RELAY_SPENT);
  share.inFlight += 1;
  res.once('close', () => (share.inFlight -= 1));
  // Counted before they are read, so two exports at once cannot pass the bound together.
  const limit = Math.min(MiB, RELAY.bytes - share.bytes);
  share.bytes += limit;
  let body: unknown;
  let bytes: Buffer | null = null;
  try {
    bytes = await readBody(req, { limit });
    share.bytes -= limit - bytes.length;
    body = parseJson(bytes);
  } catch (err) {
    const status = err instanceof HttpError ? err.status : 400;
    // A body read whole is charged what it was; one cut short nothing; one over the bound all it was allowed.
    if (bytes === null && status !== 413) share.bytes -= limit;
    refuse(res, status, errorMessage(err));
    return done(status, errorMessage(err));
  }
  // The job's own span and the gate's are svc's: a relayed span reusing one would take their place in the trace.
  const svcs = (id: string): boolean => id === own.spanId || id === gateSpanId(own.traceId, id.slice(0, 8));
  const stamp = {
    'service.name': 'svc-run', 'svc.relayed_by': 'svc-gate', 'svc.job_id': who.job, 'svc.run': who.run,
    'svc.repo': who.repo || null,
  };
  const relayed = ownTraceExport(body, own.traceId, svcs, stamp);
  if ('refused' in relayed) return deny(403, relayed.refused);
  if (share.spans + relayed.spans > RELAY.spans) return deny(413, RELAY_SPENT);
  share.spans += relayed.spans;
  const sent = { decision: 'allowed' as const, bytesUp: Buffer.byteLength(relayed.body) };
  if (!await tracer.forward(relayed.body)) return deny(502, 'the collector did not take them', {}, sent);
  res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  done(200, null, sent);
}

type Planned = Plan | { refused: string; status: number };

function planPlain(url: string, req: IncomingMessage): Planned {
  if (!/^http:\/\//i.test(url)) {
    const https = /^https:/i.test(url);
    const refused = https ? 'https goes through CONNECT' : 'not a proxy request (CONNECT, http:// or /_model/)';
    return { refused, status: 400 };
  }
  const target = URL.parse(url);
  if (!target) return { refused: 'the request target is not a URL', status: 400 };
  if (target.username || target.password) return { refused: 'a URL with userinfo is refused', status: 400 };
  const headers = [...keepHeaders(req, REQUEST_DROP), 'host', target.host];
  const dest = parseAuthority(target.host, 80);
  return {
    dest, path: target.pathname + target.search, headers, https: false, model: null, endpoint: '', metered: false,
    generation: false,
  };
}

function planModel(ctx: GateContext, method: string, url: string, req: IncomingMessage): Planned {
  const match = /^\/_model\/([a-z0-9-]+)(\/.*|\?.*)?$/.exec(url);
  const route = match ? ctx.models.get(match[1] ?? '') : undefined;
  if (!match || !route) {
    return { refused: `no model API "${(match?.[1] ?? url).slice(0, 60)}" is configured`, status: 403 };
  }
  const dest = routeDestination(route);
  const resolved = modelPath(route.base.pathname, match[2] ?? '');
  if ('refused' in resolved) return { refused: resolved.refused, status: 403 };
  // A free call (counting tokens, listing models) carries no usage: metered, it would read as one the gate could not
  // price, and a budgeted run would stop on it.
  const metered = ctx.meter !== null && !freeEndpoint(method, resolved.path, resolved.endpoint);
  const headers = [...keepHeaders(req, metered ? METERED_DROP : MODEL_DROP), 'host', route.base.host, route.header,
    route.value, ...(metered ? ['accept-encoding', 'identity'] : [])];
  const generation = metered && generationEndpoint(method, resolved.endpoint);
  const { path, endpoint } = resolved;
  return { dest, path, headers, https: route.base.protocol === 'https:',
    model: route.name, endpoint, metered, generation };
}

/**
 * The destination's status and headers written to the client, or why they cannot be (the client gets a 502). Its head
 * is untrusted: writeHead throws on a status under 100, and a throw in the 'response' listener would end the gate
 * (every job's, on `svc gate serve`). Node hands 1xx answers other than 101 to 'information', never here; a 101
 * without an Upgrade the gate sent, or a status past 599 (RFC 9110 §15), is no final answer a client can read. The
 * reason phrase stays behind: a client ignores it (RFC 9112 §4), and one with a control byte would throw too.
 */
function writeAnswerHead(res: ServerResponse, answer: IncomingMessage): string | null {
  const status = answer.statusCode ?? 0;
  if (status < 200 || status > 599) return `the destination answered with status ${status}`;
  try {
    res.writeHead(status, keepHeaders(answer, HOP_BY_HOP));
    return null;
  } catch (err) {
    return `the destination's answer head cannot be forwarded (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
  }
}

function send(
  ctx: GateContext, req: IncomingMessage, res: ServerResponse, plan: Plan, body: boolean, address: string,
  record: (extra: Partial<EgressRecord>) => void,
): void {
  const raw = ctx.connect(address, plan.dest.port);
  const { host, literal } = plan.dest;
  const tls = { socket: raw, host, servername: literal ? undefined : host, ca: ctx.ca };
  const socket: Duplex = plan.https ? tlsConnect(tls) : raw;
  let failure: string | null = null;
  let recorded = false;
  let usage: UsageMeter | null = null;
  let complete = (): boolean => false;
  let answered = false;
  // Why the request was cut before it went upstream whole (it asked what the meter cannot price), or null.
  let cut: string | null = null;
  // What a generation's request asks for bounds a call whose usage never came (usage.ts): read as its body passes.
  const asked = plan.generation ? requestMeter(plan.model ?? '', plan.endpoint, req.headers) : null;
  raw.setTimeout(ctx.limits.connectTimeoutMs);
  raw.once('connect', () => raw.setTimeout(ctx.limits.idleMs));
  const upstream = httpRequest({
    createConnection: () => socket, method: req.method, path: plan.path, headers: plan.headers, setHost: false,
  });
  const fail = (status: number, reason: string): void => {
    failure ??= reason;
    refuse(res, status, reason);
  };
  raw.on('timeout', () => {
    fail(raw.connecting ? 504 : 502, raw.connecting ? 'the destination did not answer' : 'idle timeout');
    upstream.destroy();
  });
  raw.on('error', (err: NodeJS.ErrnoException) => upstream.destroy(err));
  upstream.on('error', (err: NodeJS.ErrnoException) => {
    fail(502, `cannot reach the destination (${err.code ?? 'error'})`);
  });
  upstream.on('response', (answer) => {
    answered = true;
    answer.on('error', () => res.destroy());
    const refused = writeAnswerHead(res, answer);
    if (refused !== null) {
      answer.resume();
      return fail(502, refused);
    }
    res.flushHeaders();
    answer.pipe(res);
    const status = answer.statusCode ?? 0;
    if (!plan.metered || plan.model === null || !ctx.meter || status < 200 || status > 299) return;
    // After pipe's listener: each chunk is on its way to the client before the meter reads it.
    const meter = usageMeter(plan.model, plan.endpoint, answer.headers, ctx.meter.prices);
    usage = meter;
    complete = () => answer.complete;
    answer.on('data', (chunk: Buffer) => meter.push(chunk));
  });
  if (body && asked) {
    // Each chunk goes upstream once the meter read it (decompressed, for a compressed body): a request asking what the
    // meter cannot price is cut before the chunk that asks it goes upstream, so the API never gets a whole request.
    const checked = (chunk: Buffer | undefined, next: TransformCallback): void => {
      if (cut !== null) return next();
      const why = asked.refusal();
      if (why === null) return next(null, chunk);
      cut = why;
      req.unpipe(reading);
      reading.unpipe(upstream);
      req.resume();
      upstream.destroy();
      fail(403, why);
      next();
    };
    const reading = new Transform({
      transform: (chunk: Buffer, _encoding, next) => asked.push(chunk, () => checked(chunk, next)),
      flush: (next) => asked.end(() => checked(undefined, next)),
    });
    req.pipe(reading).pipe(upstream);
  } else if (body) {
    req.pipe(upstream);
  }
  else {
    req.resume();
    upstream.end();
  }
  res.on('close', () => {
    if (recorded) return;
    recorded = true;
    upstream.destroy();
    raw.destroy();
    // A generation whose request went out whole and whose answer never came may have run to its end at the API.
    const prices = ctx.meter?.prices;
    const unanswered = !answered && asked !== null && prices !== undefined && upstream.writableFinished;
    const metered = usage ? usage.end(asked?.read() ?? null, complete())
      : unanswered ? unansweredCall(plan.endpoint, asked.read(), prices) : null;
    record({
      status: res.statusCode, reason: failure, bytesUp: raw.bytesWritten, bytesDown: raw.bytesRead,
      ...(metered ? { metered } : {}), ...(cut !== null ? { decision: 'denied' as const } : {}),
    });
  });
}

