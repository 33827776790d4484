// OpenTelemetry traces (src/trace.ts, src/trigger/job-trace.ts): a loopback collector stand-in receives OTLP/HTTP JSON
// and checks every payload's shape; one GitHub webhook through a real `svc start` is one trace from the delivery to
// the receipt; an incoming traceparent is continued, a malformed one is not; no endpoint or `none` sends nothing; a
// collector that hangs or is down delays no delivery.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SECRETS, get, makeRepo, post, sign, startTestTrigger, type TestTrigger } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { nanos, OpenSpan, parseTraceparent, Tracer, traceSettings } from '../../src/trace.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
}

interface Collector {
  url: string;
  spans: Span[];
  /** Every way a payload broke the OTLP JSON encoding (empty when all were well-formed). */
  problems: string[];
  requests: number;
  /** The `x-otel-key` header of each request (OTEL_EXPORTER_OTLP_HEADERS), and each payload's service.name. */
  keys: Array<string | undefined>;
  services: Set<string>;
  /** Requests held open (a slow collector). */
  held: ServerResponse[];
  close(): Promise<void>;
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const VALUE_KINDS = ['stringValue', 'intValue', 'boolValue', 'doubleValue'];

/** Checks one ExportTraceServiceRequest (OTLP JSON) and returns its spans; `problems` gets what is wrong. */
function checkPayload(body: unknown, problems: string[]): Span[] {
  const fail = (what: string) => problems.push(what);
  const rs = (body as { resourceSpans?: unknown }).resourceSpans;
  if (!Array.isArray(rs) || rs.length === 0) return fail('resourceSpans is not a non-empty array'), [];
  const out: Span[] = [];
  for (const r of rs as Array<Record<string, any>>) {
    const service = (r.resource?.attributes ?? []).find((a: any) => a.key === 'service.name');
    if (typeof service?.value?.stringValue !== 'string') fail('resource has no service.name stringValue');
    for (const ss of r.scopeSpans ?? fail('no scopeSpans') ?? []) {
      if (ss.scope?.name !== 'svc') fail(`scope name ${ss.scope?.name}`);
      for (const s of ss.spans ?? []) {
        if (!HEX32.test(s.traceId) || /^0+$/.test(s.traceId)) fail(`traceId ${s.traceId}`);
        if (!HEX16.test(s.spanId) || /^0+$/.test(s.spanId)) fail(`spanId ${s.spanId}`);
        if (s.parentSpanId !== undefined && !HEX16.test(s.parentSpanId)) fail(`parentSpanId ${s.parentSpanId}`);
        if (typeof s.name !== 'string' || !s.name) fail('a span without a name');
        if (![1, 2, 3, 4, 5].includes(s.kind)) fail(`kind ${s.kind}`);
        for (const t of ['startTimeUnixNano', 'endTimeUnixNano']) {
          if (typeof s[t] !== 'string' || !/^\d{19}$/.test(s[t])) fail(`${t} ${s[t]} is not a string of nanos`);
        }
        if (BigInt(s.endTimeUnixNano ?? 0) < BigInt(s.startTimeUnixNano ?? 0)) fail(`${s.name} ends before it starts`);
        if (![0, 1, 2].includes(s.status?.code)) fail(`status ${JSON.stringify(s.status)}`);
        for (const a of s.attributes ?? []) {
          const kinds = Object.keys(a.value ?? {});
          if (typeof a.key !== 'string' || kinds.length !== 1 || !VALUE_KINDS.includes(kinds[0]!)) {
            fail(`attribute ${JSON.stringify(a)}`);
          }
          if ('intValue' in a.value && !/^-?\d+$/.test(a.value.intValue)) fail(`intValue ${a.value.intValue}`);
        }
        out.push(s as Span);
      }
    }
  }
  return out;
}

async function startCollector(mode: 'answer' | 'hang' = 'answer'): Promise<Collector> {
  const c: Omit<Collector, 'url' | 'close'> = {
    spans: [], problems: [], requests: 0, held: [], keys: [], services: new Set(),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      c.requests++;
      c.keys.push(req.headers['x-otel-key'] as string | undefined);
      if (req.method !== 'POST' || req.url !== '/v1/traces') c.problems.push(`${req.method} ${req.url}`);
      if (req.headers['content-type'] !== 'application/json') c.problems.push(`type ${req.headers['content-type']}`);
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        c.spans.push(...checkPayload(body, c.problems));
        for (const r of body.resourceSpans ?? []) {
          const name = (r.resource?.attributes ?? []).find((a: any) => a.key === 'service.name')?.value?.stringValue;
          if (typeof name === 'string') c.services.add(name);
        }
      } catch (err) {
        c.problems.push(`not JSON: ${String(err)}`);
      }
      if (mode === 'hang') c.held.push(res);
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return Object.assign(c, {
    url: `http://127.0.0.1:${port}`,
    close: () => {
      for (const res of c.held) res.destroy();
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  });
}

const attr = (s: Span, key: string) => s.attributes.find((a) => a.key === key)?.value;
const named = (c: Collector, name: string) => c.spans.filter((s) => s.name === name);

function githubIssue(number: number): { raw: Buffer; headers: Record<string, string> } {
  const raw = Buffer.from(JSON.stringify({
    action: 'labeled', label: { name: 'svc' }, issue: { number, title: 'Crash', body: 'on save' },
    repository: { full_name: 'acme/api' },
  }));
  const headers = {
    'x-hub-signature-256': `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}`, 'x-github-event': 'issues',
    'x-github-delivery': `trace-${number}`,
  };
  return { raw, headers };
}

async function ended(t: TestTrigger, id: string): Promise<Record<string, unknown>> {
  return waitFor(async () => {
    const j = (await get(`${t.url}/jobs/${id}`, bearer)).body;
    return j.status !== 'queued' && j.status !== 'running' ? j : null;
  }, `job ${id} to end`);
}

describe('traceparent', () => {
  it('takes version 00 with non-zero ids and ignores anything else', () => {
    const good = `00-${'4bf92f3577b34da6a3ce929d0e0e4736'}-${'00f067aa0ba902b7'}-01`;
    assert.deepEqual(parseTraceparent(good), { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7' });
    for (const bad of [
      undefined, ['a', 'b'], '', 'garbage', good.toUpperCase(), `01-${good.slice(3)}`, `00-${'0'.repeat(32)}-${'1'.repeat(16)}-01`,
      `00-${'1'.repeat(32)}-${'0'.repeat(16)}-01`, `${good}-extra`, `00-${'1'.repeat(31)}-${'1'.repeat(16)}-01`,
    ]) assert.equal(parseTraceparent(bad), null, String(bad));
  });

  it('follows the OpenTelemetry variables: the traces endpoint as-is, the base plus /v1/traces, none, the name', () => {
    assert.equal(traceSettings({}, 'x').url, null);
    assert.equal(traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' }, 'x').url, 'http://c:4318/v1/traces');
    const both = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://d/t' };
    assert.equal(traceSettings(both, 'x').url, 'http://d/t');
    assert.equal(traceSettings({ ...both, OTEL_TRACES_EXPORTER: 'none' }, 'x').url, null);
    assert.equal(traceSettings({ OTEL_SERVICE_NAME: 'edge' }, 'x').service, 'edge');
    const h = traceSettings({ OTEL_EXPORTER_OTLP_HEADERS: 'api-key=s%20ecret, x-team = a=b,bad' }, 'x').headers;
    assert.deepEqual(h, { 'api-key': 's ecret', 'x-team': 'a=b' });
  });

  it('a tracer whose collector is down drops (and counts) its spans, and sends the configured headers', async () => {
    const down = await startCollector();
    await down.close();
    const tracer = new Tracer(traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: down.url }, 'svc-test'));
    new OpenSpan(tracer, 'lost', null).end();
    await tracer.flush();
    assert.equal(tracer.dropped, 1);
    assert.equal(tracer.sent, 0);
    let auth: string | undefined;
    const server = await new Promise<ReturnType<typeof createServer>>((resolve) => {
      const s = createServer((req, res) => {
        auth = req.headers['x-api-key'] as string;
        req.resume().on('end', () => res.end('{}'));
      }).listen(0, '127.0.0.1', () => resolve(s));
    });
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const sender = new Tracer(traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=k1' }, 's'));
    new OpenSpan(sender, 'kept', null, { startMs: 1_700_000_000_000 }).end('ok', {}, 1_700_000_000_005);
    await sender.flush();
    assert.equal(auth, 'k1');
    assert.equal(sender.sent, 1);
    assert.equal(nanos(1_700_000_000_005), '1700000000005000000');
    server.close();
  });
});

describe('a tracer at shutdown', () => {
  it('does not wait past its bound for a collector that holds the export open, and counts what it dropped', async () => {
    const slow = await startCollector('hang');
    const tracer = new Tracer(traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: slow.url }, 'svc-test'));
    new OpenSpan(tracer, 'held', null).end();
    await tracer.flush(100);
    await waitFor(() => slow.held.length === 1, 'the collector to hold the export');
    new OpenSpan(tracer, 'queued behind it', null).end();
    await tracer.flush(100);
    assert.equal(tracer.sent, 0);
    assert.equal(tracer.dropped, 1, 'the span queued behind the held export is dropped');
    await slow.close();
  });
});

describe('traces across the trigger server and a real run', () => {
  it('one GitHub webhook is one trace: delivery → job → run → sandbox, provider, checks, receipt, PR', async () => {
    const collector = await startCollector();
    const repo = makeRepo();
    mkdirSync(join(repo, '.svc'), { recursive: true });
    // The agent also asks its egress gate for a host no policy allows (.invalid never resolves): one denied connection.
    const agent = 'echo fixed > fixed.txt; curl -s -m 20 -o /dev/null http://denied.invalid/; true';
    writeFileSync(join(repo, '.svc', 'config.json'), JSON.stringify({
      provider: 'fake', providers: { fake: { command: ['sh', '-c', agent] } },
    }));
    // No pull request is opened (no forge is reached): the PR step still runs, and is a span.
    writeFileSync(join(repo, '.svc', 'policy.json'), JSON.stringify({ pr: { open: 'never' } }));
    const git = (...a: string[]) => execFileSync('git', a, { cwd: repo, stdio: 'ignore', env: { ...process.env, HOME: repo } });
    git('add', '.svc');
    git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'svc settings');
    // The export headers are a secret: they reach the run's worker through the secrets pipe, and every export has them.
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_EXPORTER_OTLP_HEADERS: 'x-otel-key=otel-k1' };
    const t = await startTestTrigger(otel, { repo, cliPath: CLI });
    try {
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const caller = '00f067aa0ba902b7';
      const { raw, headers } = githubIssue(11);
      const res = await post(`${t.url}/webhook`, raw, { ...headers, traceparent: `00-${traceId}-${caller}-01` });
      assert.equal(res.status, 202);
      const job = await ended(t, res.body.job_id as string);
      const run = job.run as { source: string; run: string };
      const want = ['svc.delivery', 'svc.job', 'svc.run', 'svc.sandbox', 'svc.provider', 'svc.checks', 'svc.receipt',
        'svc.pr', 'svc.gate.connection'];
      await waitFor(() => want.every((n) => named(collector, n).length > 0), `spans ${want.join(', ')}`);
      assert.deepEqual(collector.problems, []);
      assert.deepEqual([...collector.services].sort(), ['svc-run', 'svc-trigger']);
      assert.deepEqual([...new Set(collector.keys)], ['otel-k1']);
      // One trace: every span carries the caller's trace id.
      assert.deepEqual([...new Set(collector.spans.map((s) => s.traceId))], [traceId]);
      const [delivery] = named(collector, 'svc.delivery');
      const [jobSpan] = named(collector, 'svc.job');
      const [runSpan] = named(collector, 'svc.run');
      assert.equal(delivery!.parentSpanId, caller);
      assert.equal(jobSpan!.parentSpanId, delivery!.spanId);
      assert.equal(runSpan!.parentSpanId, jobSpan!.spanId);
      for (const n of want.slice(3)) {
        for (const s of named(collector, n)) assert.equal(s.parentSpanId, runSpan!.spanId, n);
      }
      assert.deepEqual(attr(delivery!, 'svc.job_id'), { stringValue: job.id });
      assert.deepEqual(attr(runSpan!, 'svc.run'), { stringValue: run.run });
      assert.deepEqual(attr(named(collector, 'svc.provider')[0]!, 'svc.invocation'), { intValue: '1' });
      const [connection] = named(collector, 'svc.gate.connection');
      assert.deepEqual(attr(connection!, 'server.address'), { stringValue: 'denied.invalid' });
      assert.deepEqual(attr(connection!, 'svc.gate.decision'), { stringValue: 'denied' });
      // No span carries the brief.
      assert.ok(!JSON.stringify(collector.spans).includes('on save'));
      const state = JSON.parse(readFileSync(join(repo, '.svc', 'runs', run.run, 'state.json'), 'utf8')) as Record<string, unknown>;
      assert.equal(state.trace_id, traceId);
      const receipt = JSON.parse(readFileSync(join(repo, '.svc', 'runs', run.run, 'artifacts', 'receipt.json'), 'utf8')) as Record<string, unknown>;
      assert.equal(receipt.trace_id, traceId);
      // Never where an agent could read it: not in the run's state, events or logs.
      const runDir = join(repo, '.svc', 'runs', run.run);
      const runFiles = execFileSync('sh', ['-c', 'grep -rl otel-k1 "$1" || true', 'sh', runDir], { encoding: 'utf8' });
      assert.equal(runFiles, '');
    } finally {
      await t.jobLoop.idle();
      await t.cleanup();
      await collector.close();
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('a malformed traceparent starts a new trace, is not echoed, and the job hands its own span to svc start', async () => {
    const collector = await startCollector();
    const t = await startTestTrigger({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url });
    try {
      const forged = `00-${'0'.repeat(32)}-${'1'.repeat(16)}-01`;
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'trace me' }), { ...bearer, traceparent: forged });
      assert.equal(res.status, 202);
      assert.equal(res.headers.get('traceparent'), null);
      assert.ok(!JSON.stringify(res.body).includes('1111111111111111'));
      await ended(t, res.body.job_id as string);
      await waitFor(() => named(collector, 'svc.job').length > 0, 'the job span');
      assert.deepEqual(collector.problems, []);
      const [delivery] = named(collector, 'svc.delivery');
      const [jobSpan] = named(collector, 'svc.job');
      assert.equal(delivery!.parentSpanId, undefined);
      assert.notEqual(delivery!.traceId, '0'.repeat(32));
      assert.equal(jobSpan!.traceId, delivery!.traceId);
      assert.ok(!JSON.stringify(collector.spans).includes('1111111111111111'));
      const [call] = t.calls();
      assert.equal(call!.env.SVC_TRACEPARENT, `00-${jobSpan!.traceId}-${jobSpan!.spanId}-01`);
      assert.equal(call!.env.OTEL_EXPORTER_OTLP_ENDPOINT, collector.url);
    } finally {
      await t.cleanup();
      await collector.close();
    }
  });

  it('OTEL_TRACES_EXPORTER=none sends nothing; a run carries the caller\'s traceparent as it came, or a new one', async () => {
    const collector = await startCollector();
    const t = await startTestTrigger({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_TRACES_EXPORTER: 'none' });
    try {
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'quiet' }), bearer);
      assert.equal(res.status, 202);
      await ended(t, res.body.job_id as string);
      const caller = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const traced = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'carried' }), { ...bearer, traceparent: caller });
      assert.equal(traced.status, 202);
      await ended(t, traced.body.job_id as string);
      await t.close();
      assert.equal(collector.requests, 0);
      const [first, second] = t.calls();
      assert.ok(parseTraceparent(first!.env.SVC_TRACEPARENT));
      assert.notEqual(first!.env.SVC_TRACEPARENT, caller);
      assert.equal(second!.env.SVC_TRACEPARENT, caller);
    } finally {
      await t.cleanup();
      await collector.close();
    }
  });

  it('a collector that holds every request open delays no delivery\'s 202', async () => {
    const collector = await startCollector('hang');
    const t = await startTestTrigger({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url });
    try {
      const first = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'one' }), bearer);
      assert.equal(first.status, 202);
      await waitFor(() => collector.held.length > 0, 'the collector to hold an export');
      // The export is still open: deliveries are answered all the same.
      for (const brief of ['two', 'three']) {
        const res = await post(`${t.url}/jobs`, JSON.stringify({ brief }), bearer);
        assert.equal(res.status, 202);
      }
      assert.equal(collector.held.length, 1);
    } finally {
      await collector.close();
      await t.cleanup();
    }
  });
});
