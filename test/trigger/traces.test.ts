// OpenTelemetry traces (src/trace.ts, src/trigger/job-trace.ts): a loopback collector stand-in receives OTLP/HTTP JSON
// and checks every payload's shape; one GitHub webhook through a real `svc start` is one trace from the delivery to
// the receipt; an incoming traceparent is continued, a malformed one is not; no endpoint or `none` sends nothing; a
// collector that hangs or is down delays no delivery. The egress gate (a run's own, and `svc gate serve` for pods)
// records each connection in its run's trace and passes the model API a traceparent; an agent's own is dropped.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OWN, SECRETS, get, makeRepo, post, sign, startTestTrigger, type TestTrigger } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { nanos, OpenSpan, otlpBody, parseTraceparent, Tracer, traceSettings } from '../../src/trace.ts';
import { buildKubeJob } from '../../src/trigger/kubernetes-executor.ts';
import { kubernetesSettingsFromEnv } from '../../src/trigger/kubernetes-pod.ts';
import { makeRepo as makeEngineRepo, GIT_ENV } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { mintJobCredential } from '../../src/gate/job-credential.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
  status?: { code?: number };
}

interface Collector {
  url: string;
  spans: Span[];
  /** Every way a payload broke the OTLP JSON encoding (empty when all were well-formed). */
  problems: string[];
  requests: number;
  /** Each request's body as it came. */
  bodies: string[];
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
    spans: [], problems: [], requests: 0, bodies: [], held: [], keys: [], services: new Set(),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      c.requests++;
      c.keys.push(req.headers['x-otel-key'] as string | undefined);
      if (req.method !== 'POST' || req.url !== '/v1/traces') c.problems.push(`${req.method} ${req.url}`);
      if (req.headers['content-type'] !== 'application/json') c.problems.push(`type ${req.headers['content-type']}`);
      c.bodies.push(Buffer.concat(chunks).toString('utf8'));
      try {
        const body = JSON.parse(c.bodies.at(-1)!);
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
    action: 'labeled', label: { name: 'svc' }, issue: { number, title: 'Crash', body: 'on save', ...OWN },
    sender: OWN.user, repository: { full_name: 'acme/api' },
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

  it('a /svc comment whose author GitHub cannot vouch for still ends its delivery span, as skipped', async () => {
    const collector = await startCollector();
    const repo = makeRepo();
    // No GITHUB_TOKEN: whether the author may write cannot be asked, which fails closed (skipped).
    const t = await startTestTrigger({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url }, { repo });
    try {
      const raw = Buffer.from(JSON.stringify({
        action: 'created', repository: { full_name: 'acme/api' }, issue: { number: 12, title: 'Crash' },
        comment: { id: 12, body: '/svc fix it', user: { login: 'member' }, author_association: 'MEMBER' },
      }));
      const res = await post(`${t.url}/webhook`, raw, {
        'x-hub-signature-256': `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}`,
        'x-github-event': 'issue_comment', 'x-github-delivery': 'trace-comment-12',
      });
      assert.equal(res.body.status, 'skipped', JSON.stringify(res.body));
      await waitFor(() => named(collector, 'svc.delivery').length > 0, 'the delivery span');
      const [delivery] = named(collector, 'svc.delivery');
      assert.deepEqual(attr(delivery!, 'svc.outcome'), { stringValue: 'skipped' });
      assert.deepEqual(collector.problems, []);
    } finally {
      await t.cleanup();
      await collector.close();
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('a follow-up refused (a pull request not svc\'s) ends its delivery span as refused, not an error', async () => {
    const collector = await startCollector();
    const repo = makeRepo();
    const t = await startTestTrigger({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url }, { repo });
    try {
      const pull = { number: 12, state: 'open', html_url: 'https://github.example/acme/api/pull/12',
        head: { ref: 'feature/x', sha: 'a'.repeat(40), repo: { full_name: 'acme/api' } },
        base: { ref: 'main', repo: { full_name: 'acme/api' } } };
      const raw = Buffer.from(JSON.stringify({
        action: 'submitted', repository: { full_name: 'acme/api' }, pull_request: pull,
        review: { id: 77, state: 'changes_requested', body: '/svc fix it', author_association: 'MEMBER',
          user: { login: 'bo' } },
      }));
      const res = await post(`${t.url}/webhook`, raw, {
        'x-hub-signature-256': `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}`,
        'x-github-event': 'pull_request_review', 'x-github-delivery': 'trace-review-77',
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      await waitFor(() => named(collector, 'svc.delivery').length > 0, 'the delivery span');
      const [delivery] = named(collector, 'svc.delivery');
      assert.deepEqual(attr(delivery!, 'svc.outcome'), { stringValue: 'refused' });
      assert.notEqual(delivery!.status?.code, 2, 'no error status');
      assert.deepEqual(collector.problems, []);
    } finally {
      await t.cleanup();
      await collector.close();
      rmSync(repo, { recursive: true, force: true });
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

/** The agent's model call with a traceparent of its own choosing: another run's trace, which it must not reach. */
const OTHER_TRACE = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
const FORGED = `00-${OTHER_TRACE}-1122334455667788-01`;
const MODEL_CALLER = `#!/bin/sh
cat > /dev/null
curl -s -o /dev/null --max-time 20 "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" \\
  -H 'content-type: application/json' -H 'traceparent: ${FORGED}' -d '{"model":"m"}'
echo called >> a.txt
`;

/** A model API stand-in on loopback that keeps each request's traceparent. */
async function startModel(): Promise<{ url: string; traceparents: Array<string | undefined>; close(): void }> {
  const traceparents: Array<string | undefined> = [];
  const server = createServer((req, res) => {
    traceparents.push(req.headers.traceparent as string | undefined);
    req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return { url, traceparents, close: () => { server.closeAllConnections(); server.close(); } };
}



describe('a run\'s model calls through its egress gate', { skip: !bwrapWorks && 'needs bubblewrap' }, () => {
  it('are spans of the run\'s trace, and the model API gets a traceparent naming that span, not the agent\'s',
    async () => {
      const collector = await startCollector();
      const model = await startModel();
      const repo = makeEngineRepo({ providers: { caller: MODEL_CALLER } });
      const traceId = '0af7651916cd43dd8448eb211c80319c';
      const env: NodeJS.ProcessEnv = {
        ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
        ANTHROPIC_API_KEY: 'sk-ant-real', ANTHROPIC_BASE_URL: model.url,
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, SVC_TRACEPARENT: `00-${traceId}-b7ad6b7169203331-01`,
      };
      delete env.SVC_SANDBOX;
      try {
        const run = await runChild(process.execPath, [CLI, 'start', '--brief', 'call the model', '--worktree',
          '--provider', 'caller'], { cwd: repo.repo, env });
        assert.equal(run.code, 0, run.stderr);
        await waitFor(() => named(collector, 'svc.run').length > 0, 'the run span');
        assert.deepEqual(collector.problems, []);
        const [runSpan] = named(collector, 'svc.run');
        const calls = named(collector, 'svc.gate.connection')
          .filter((s) => attr(s, 'svc.gate.kind')?.stringValue === 'model');
        assert.equal(calls.length, 1);
        const call = calls[0]!;
        assert.equal(call.traceId, traceId);
        assert.equal(call.parentSpanId, runSpan!.spanId);
        assert.deepEqual(attr(call, 'svc.gate.model_api'), { stringValue: 'anthropic' });
        // The model API continues the run's trace, under the gate's span; the agent's traceparent never reached it.
        assert.deepEqual(model.traceparents, [`00-${traceId}-${call.spanId}-01`]);
        assert.ok(collector.spans.every((s) => s.traceId === traceId));
        assert.ok(!JSON.stringify(collector.spans).includes(OTHER_TRACE));
      } finally {
        await collector.close();
        model.close();
        repo.cleanup();
      }
    });
});

describe('svc gate serve (the pods\' gate) in a job\'s trace', () => {
  const SECRET = 'traces-gate-secret-0123456789abcdef';
  const mine = { traceId: '5b8efff798038103d269b633813fc60c', spanId: 'eee19b7ec3c1b174' };
  const jobSpan = `00-${mine.traceId}-${mine.spanId}-01`;
  const credential = (trace?: string) => mintJobCredential(Buffer.from(SECRET),
    { job: 'job-a', run: 'run-a', repo: 'acme/web', ...(trace ? { trace } : {}) }, Date.now() + 3600_000);
  let collector: Collector;
  let model: Awaited<ReturnType<typeof startModel>>;
  let dir: string;
  let gate: ChildProcess;
  let port = 0;

  /** A request to the gate as a pod makes it, with a traceparent naming another run's trace. */
  const toGate = (path: string, body: string) => new Promise<number>((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path,
      headers: { traceparent: FORGED, 'x-api-key': 'placeholder', 'content-type': 'application/json' } }, (res) => {
      res.resume().on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
  const callModel = (cred: string) => toGate(`/_job/${cred}/_model/anthropic/v1/x`, '{}');
  const spansOf = (trace: string) => collector.spans.filter((s) => s.traceId === trace);

  before(async () => {
    collector = await startCollector();
    model = await startModel();
    dir = mkdtempSync(join(tmpdir(), 'svc-trace-gate-'));
    writeFileSync(join(dir, 'gate-secret'), SECRET, { mode: 0o600 });
    // The collector's key is the gate's (a secret no pod holds).
    gate = spawn(process.execPath, [CLI, 'gate', 'serve', '--port', '0'], {
      env: {
        PATH: process.env.PATH, HOME: dir, ANTHROPIC_API_KEY: 'sk-ant-real', ANTHROPIC_BASE_URL: model.url,
        SVC_GATE_SECRET_FILE: join(dir, 'gate-secret'), OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_EXPORTER_OTLP_HEADERS: 'x-otel-key=gate-key',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    gate.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
    port = Number(await waitFor(() => /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1], 'the gate'));
  });
  after(async () => {
    gate.kill('SIGKILL');
    await collector.close();
    model.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('records a job\'s model call under the span its credential names and passes that on, never the agent\'s',
    async () => {
      assert.equal(await callModel(credential(jobSpan)), 200);
      await waitFor(() => named(collector, 'svc.gate.connection').length > 0, 'the gate span');
      const [span] = named(collector, 'svc.gate.connection');
      assert.equal(span!.traceId, mine.traceId);
      assert.equal(span!.parentSpanId, mine.spanId);
      assert.deepEqual(attr(span!, 'svc.job_id'), { stringValue: 'job-a' });
      assert.deepEqual([...collector.services], ['svc-gate']);
      assert.deepEqual(model.traceparents, [`00-${mine.traceId}-${span!.spanId}-01`]);
      // A credential without a trace: the call goes through untraced, and the agent's traceparent still stays here.
      assert.equal(await callModel(credential()), 200);
      assert.equal(model.traceparents.at(-1), undefined);
      assert.deepEqual(collector.problems, []);
      assert.deepEqual(spansOf(OTHER_TRACE), []);
    });

  it('refuses a credential the agent rewrote to name another run\'s trace', async () => {
    const [prefix, payload, mac] = credential(jobSpan).split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8'));
    const forged = Buffer.from(JSON.stringify({ ...claims, tp: FORGED })).toString('base64url');
    const calls = model.traceparents.length;
    assert.equal(await callModel(`${prefix}.${forged}.${mac}`), 407);
    assert.equal(model.traceparents.length, calls);
    assert.deepEqual(spansOf(OTHER_TRACE), []);
  });

  it('carries a pod run\'s spans from the pod spec\'s settings into the job\'s trace, and no other trace\'s', async () => {
    // The pod spec the trigger makes for a job, behind this gate, with export on.
    const trigger = {
      PATH: process.env.PATH, HOME: dir, SVC_K8S_IMAGE: 'registry.test/svc:1', SVC_K8S_GATE_URL: `http://127.0.0.1:${port}`,
      SVC_GATE_SECRET_FILE: join(dir, 'gate-secret'), OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-otel-key=trigger-key',
    };
    const job = buildKubeJob({ id: 'job-p', args: ['start', 'x'], traceparent: jobSpan },
      kubernetesSettingsFromEnv(trigger), 'build', trigger) as any;
    assert.ok(!JSON.stringify(job).includes('trigger-key'), 'the export headers reach no pod');
    const run = job.spec.template.spec.initContainers.find((c: { name: string }) => c.name === 'run');
    const podEnv = Object.fromEntries(run.env.map((v: { name: string; value: string }) => [v.name, v.value]));
    assert.equal(run.env.length, Object.keys(podEnv).length, 'no variable twice');
    assert.equal(podEnv.SVC_TRACEPARENT, jobSpan);
    // The run's worker in the pod: its tracer, made from that environment as svc-run makes it, exports to the gate.
    const tracer = new Tracer(traceSettings(podEnv, 'svc-run'));
    new OpenSpan(tracer, 'svc.run', parseTraceparent(podEnv.SVC_TRACEPARENT)).end('ok');
    await tracer.flush();
    assert.equal(tracer.sent, 1);
    await waitFor(() => named(collector, 'svc.run').length > 0, 'the pod run\'s span');
    const [runSpan] = named(collector, 'svc.run');
    assert.equal(runSpan!.traceId, mine.traceId);
    assert.equal(runSpan!.parentSpanId, mine.spanId);
    assert.ok(collector.services.has('svc-run'));
    assert.deepEqual([...new Set(collector.keys)], ['gate-key']);
    // The attack: the pod's agent posts, with its own credential, an export naming another run's trace.
    const url = new URL(podEnv.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT!);
    const other = { traceId: OTHER_TRACE, spanId: '1122334455667788', parentSpanId: null, name: 'svc.run',
      kind: 'internal' as const, start: nanos(Date.now()), end: nanos(Date.now()), attributes: {}, status: 'ok' as const };
    const requests = collector.requests;
    assert.equal(await toGate(url.pathname, otlpBody('svc-run', [other])), 403);
    assert.equal(await toGate(url.pathname, otlpBody('svc-run', [{ ...other, traceId: mine.traceId }, other])), 403);
    assert.equal(collector.requests, requests);
    // The attack a collector's looser reader allows: its own span checked, another trace beside it under the
    // snake_case names (and as a second id on the span), which a collector reads too. Only what was checked goes on.
    const own = JSON.parse(otlpBody('svc-run', [{ ...other, traceId: mine.traceId, name: 'svc.own' }]));
    const span = own.resourceSpans[0].scopeSpans[0].spans[0];
    span.trace_id = OTHER_TRACE;
    own.resource_spans = [{ scope_spans: [{ spans: [{ ...span, name: 'svc.theirs', traceId: OTHER_TRACE }] }] }];
    assert.equal(await toGate(url.pathname, JSON.stringify(own)), 200);
    await waitFor(() => named(collector, 'svc.own').length > 0, 'the pod\'s own span');
    assert.ok(collector.bodies.every((b) => !b.includes(OTHER_TRACE)), 'no other trace id reached the collector');
    // Relayed spans say which job relayed them, whatever the pod wrote.
    const relayed = collector.bodies.map((b) => JSON.parse(b)).find((b) => JSON.stringify(b).includes('svc.own'));
    const stamp = relayed.resourceSpans[0].resource.attributes;
    assert.equal(stamp.find((a: { key: string }) => a.key === 'svc.job_id')?.value.stringValue, 'job-p');
    assert.deepEqual(spansOf(OTHER_TRACE), []);
    assert.deepEqual(collector.problems, []);
  });
});
