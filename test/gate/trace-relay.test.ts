// The shared gate's span relay (`POST /_job/<credential>/_traces`), attacked by the pod whose credential it is: spans
// dressed as svc's servers (service.name, identity attributes), span ids that are svc's own (the job's span, the
// gate's connection spans), exports that the rebuild would inflate, and exports without end. The collector is a loopback stand-in. Each relay is
// egress evidence like any request, and its connection span ends. With tracing off the gate does no trace work.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { mintJobCredential, type JobIdentity } from '../../src/gate/job-credential.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import { otlpBody, Tracer, traceSettings, type SpanRecord } from '../../src/trace.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { gateRequest, recordingConnect, startUpstream, type Reply, type Upstream } from './helpers.ts';

const SECRET = Buffer.from('trace-relay-secret-0123456789abcdef0123456789');
const TRACE = '5b8efff798038103d269b633813fc60c';
const JOB_SPAN = 'eee19b7ec3c1b174';
const who = (n: string): JobIdentity =>
  ({ job: `job-${n}`, run: `run-${n}`, repo: 'acme/web', trace: `00-${TRACE}-${JOB_SPAN}-01` });
const cred = (n: string) => mintJobCredential(SECRET, who(n), Date.now() + 3600_000);

interface Collector {
  url: string;
  bodies: any[];
  /** The bodies the gate relayed for pods (its own span exports left out). */
  relayed: any[];
  /** While set, exports are held unanswered (a slow collector). */
  holding: boolean;
  held: ServerResponse[];
  release(): void;
  close(): Promise<void>;
}

async function startCollector(): Promise<Collector> {
  const c = { bodies: [] as any[], relayed: [] as any[], holding: false, held: [] as ServerResponse[] };
  const server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8').on('data', (d: string) => (text += d)).on('end', () => {
      const body = JSON.parse(text);
      c.bodies.push(body);
      // The gate's own spans arrive whenever its tracer flushes: only relayed exports are counted and held.
      const gates = attrs(body.resourceSpans?.[0]?.resource?.attributes ?? [])['service.name'] === 'svc-gate';
      if (gates) return void res.writeHead(200).end('{}');
      c.relayed.push(body);
      if (c.holding) c.held.push(res);
      else res.writeHead(200).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return Object.assign(c, {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    release: () => {
      c.holding = false;
      for (const res of c.held.splice(0)) res.writeHead(200).end('{}');
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  });
}

const span = (o: Partial<SpanRecord> = {}): SpanRecord => ({
  traceId: TRACE, spanId: '1122334455667788', parentSpanId: JOB_SPAN, name: 'svc.run', kind: 'internal',
  start: '1', end: '2', attributes: {}, status: 'ok', ...o,
});
const attrs = (list: Array<{ key: string; value: Record<string, unknown> }>) =>
  Object.fromEntries(list.map((a) => [a.key, Object.values(a.value)[0]]));

describe('the shared gate relaying a pod\'s spans', () => {
  const records: EgressRecord[] = [];
  let collector: Collector;
  let upstream: Upstream;
  let tracer: Tracer;
  let gate: Gate;
  let at: { port: number };
  const relay = (n: string, body: string): Promise<Reply> => gateRequest(at, `/_job/${cred(n)}/_traces`,
    { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  const relaysOf = (n: string) => records.filter((r) => r.kind === 'traces' && r.run === `run-${n}`);

  before(async () => {
    collector = await startCollector();
    upstream = await startUpstream('127.0.0.2');
    tracer = new Tracer(traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url }, 'svc-gate'));
    const policy = parseGatePolicy({ allow: [`127.0.0.2:${upstream.port}`] });
    gate = await startGate({
      policy, tcpPort: 0, connect: recordingConnect().connect, onRecord: (r) => records.push(r),
      clients: { secret: SECRET, maxPerClient: 8, policyFor: () => policy }, trace: { tracer, parent: null },
    });
    at = { port: gate.port ?? 0 };
  });
  after(async () => {
    await gate.close();
    await collector.close();
    await upstream.close();
  });

  it('passes a pod\'s spans on as its own run\'s, whatever service and identity the pod wrote', async () => {
    const export_ = JSON.parse(otlpBody('svc-trigger', [span({
      attributes: { 'svc.run': 'someone-else', 'svc.job_id': 'job-z', 'svc.gate.decision': 'allowed',
        'svc.relayed_by': 'svc-trigger', 'service.name': 'svc-trigger', 'svc.provider': 'claude' },
    })]));
    export_.resourceSpans[0].resource.attributes.push({ key: 'svc.run', value: { stringValue: 'someone-else' } });
    const before = collector.relayed.length;
    assert.equal((await relay('a', JSON.stringify(export_))).status, 200);
    const sent = collector.relayed[before];
    assert.deepEqual(attrs(sent.resourceSpans[0].resource.attributes), {
      'service.name': 'svc-run', 'svc.relayed_by': 'svc-gate', 'svc.job_id': 'job-a', 'svc.run': 'run-a',
      'svc.repo': 'acme/web',
    });
    // The pod's own attributes stay (its own run gate's svc.gate.* too); those saying whose the span is are the gate's.
    assert.deepEqual(attrs(sent.resourceSpans[0].scopeSpans[0].spans[0].attributes),
      { 'svc.gate.decision': 'allowed', 'svc.provider': 'claude' });
  });

  it('relays the spans of a pod\'s own run gate (svc.gate.* names) under the run\'s service', async () => {
    const before = collector.relayed.length;
    const body = otlpBody('svc-run', [span({ name: 'svc.gate.connection', spanId: '99887766554433aa' })]);
    assert.equal((await relay('a', body)).status, 200);
    const sent = collector.relayed[before];
    assert.equal(sent.resourceSpans[0].scopeSpans[0].spans[0].name, 'svc.gate.connection');
    assert.equal(attrs(sent.resourceSpans[0].resource.attributes)['service.name'], 'svc-run');
  });

  it('sends on an export about the size it came: empty resources and scopes do not pass', async () => {
    const export_ = JSON.parse(otlpBody('svc-run', [span({ spanId: '1234123412341234' })]));
    const empties = Array.from({ length: 20_000 }, () => ({}));
    export_.resourceSpans.push(...empties, { scopeSpans: empties });
    const body = JSON.stringify(export_);
    const before = collector.relayed.length;
    assert.equal((await relay('a', body)).status, 200);
    const sent = JSON.stringify(collector.relayed[before]);
    assert.ok(sent.length < 2_000, `${sent.length} bytes sent for ${body.length} received`);
    assert.equal(collector.relayed[before].resourceSpans.length, 1);
    assert.equal(collector.relayed[before].resourceSpans[0].scopeSpans.length, 1);
  });

  it('refuses spans reusing the job\'s span id or malformed, and sends the collector none', async () => {
    const relayed = () => collector.relayed.length;
    const before = relayed();
    const attacks = [
      [span(), span({ spanId: JOB_SPAN, name: 'svc.own' })],
      [span({ spanId: JOB_SPAN.toUpperCase() })],
      [span({ spanId: 'not-an-id' })], [span({ parentSpanId: 'xyz' })],
      [span({ traceId: 'a1b2c3d4e5f60718293a4b5c6d7e8f90' })],
    ];
    for (const spans of attacks) {
      const answer = await relay('b', otlpBody('svc-run', spans));
      assert.equal(answer.status, 403, JSON.stringify(spans));
    }
    assert.equal(relayed(), before);
    const refused = relaysOf('b');
    assert.equal(refused.length, attacks.length);
    assert.ok(refused.every((r) => r.decision === 'denied' && r.status === 403 && r.bytesUp === 0));
    assert.match(refused[0]!.reason!, /svc's own/);
  });

  it('refuses a body that is not JSON with 400, and sends the collector nothing', async () => {
    const before = collector.relayed.length;
    const answer = await relay('j', '{"resourceSpans": [');
    assert.equal(answer.status, 400);
    assert.equal(answer.body, 'svc gate: Request body is not valid JSON\n');
    assert.equal(collector.relayed.length, before);
    assert.deepEqual(relaysOf('j').map((r) => [r.decision, r.status]), [['denied', 400]]);
  });

  it('refuses a span reusing the id of the gate\'s own connection span, learnt from a traceparent', async () => {
    // An allowed destination the agent runs sees the traceparent naming the gate's span for the request.
    const seen = upstream.seen.length;
    const via = await gateRequest(at, `http://127.0.0.2:${upstream.port}/x`, {
      headers: { 'proxy-authorization': `Basic ${Buffer.from(`svc:${cred('c')}`).toString('base64')}` },
    });
    assert.equal(via.status, 200);
    const gateSpan = /^00-[0-9a-f]{32}-([0-9a-f]{16})-01$/.exec(String(upstream.seen[seen]?.headers.traceparent))?.[1];
    assert.ok(gateSpan);
    const before = collector.relayed.length;
    assert.equal((await relay('c', otlpBody('svc-run', [span({ spanId: gateSpan, name: 'svc.model' })]))).status, 403);
    assert.equal((await relay('c', otlpBody('svc-run', [span({ parentSpanId: gateSpan })]))).status, 200);
    assert.equal(collector.relayed.length, before + 1);
  });

  it('records each relay as the run\'s egress, and ends the relay\'s span', async () => {
    const body = otlpBody('svc-run', [span({ spanId: 'abcdef0123456789', name: 'svc.checks' })]);
    assert.equal((await relay('d', body)).status, 200);
    const [record] = relaysOf('d');
    const port = Number(new URL(collector.url).port);
    assert.equal(record?.decision, 'allowed');
    assert.equal(record?.status, 200);
    assert.equal(record?.host, '127.0.0.1');
    assert.equal(record?.port, port);
    assert.equal(record?.job, 'job-d');
    assert.ok(record!.bytesUp > 100);
    const evidence = JSON.parse((await gateRequest(at, `/_job/${cred('d')}/_egress`)).body);
    assert.equal(evidence.connections, 1);
    assert.deepEqual(evidence.hosts.map((h: { host: string; port: number }) => [h.host, h.port]), [['127.0.0.1', port]]);
    // The relay was a connection of the job's trace: its span reaches the collector, ended, under the job's span.
    await tracer.flush();
    const gateSpans = collector.bodies.flatMap((b) => b.resourceSpans[0].scopeSpans[0].spans)
      .filter((s: any) => s.name === 'svc.gate.connection' && attrs(s.attributes)['svc.job_id'] === 'job-d');
    assert.equal(gateSpans.length, 1);
    assert.equal(attrs(gateSpans[0].attributes)['svc.gate.kind'], 'traces');
    assert.equal(gateSpans[0].parentSpanId, JOB_SPAN);
  });

  it('holds a job to two exports under way: a third is 429 with Retry-After, another job still relays', async () => {
    collector.holding = true;
    const held = [relay('e', otlpBody('svc-run', [span()])), relay('e', otlpBody('svc-run', [span()]))];
    await waitFor(() => collector.held.length === 2, 'the collector to hold both exports');
    const third = await relay('e', otlpBody('svc-run', [span()]));
    assert.equal(third.status, 429);
    assert.equal(third.headers['retry-after'], '1');
    const other = relay('f', otlpBody('svc-run', [span()]));
    await waitFor(() => collector.held.length === 3, 'another job\'s export');
    collector.release();
    assert.deepEqual((await Promise.all([...held, other])).map((r) => r.status), [200, 200, 200]);
    assert.equal((await relay('e', otlpBody('svc-run', [span()]))).status, 200);
    assert.deepEqual(relaysOf('e').map((r) => r.status), [429, 200, 200, 200]);
  });

  it('stops a pod that posts 1 MiB bodies without end at 16 MiB: 413, unread, and nothing more reaches the collector',
    async () => {
      const mib = JSON.stringify({ padding: 'x'.repeat(1024 * 1024 - '{"padding":""}'.length) });
      assert.equal(mib.length, 1024 * 1024);
      for (let i = 0; i < 16; i++) assert.equal((await relay('g', mib)).status, 403, `export ${i}`);
      const before = collector.relayed.length;
      const over = await relay('g', otlpBody('svc-run', [span()]));
      assert.equal(over.status, 413);
      assert.match(over.body, /16 MiB/);
      assert.equal(collector.relayed.length, before);
      assert.equal(relaysOf('g').length, 17);
    });

  it('stops a job at 10,000 spans', async () => {
    const many = (from: number) => otlpBody('svc-run', Array.from({ length: 4000 },
      (_, i) => span({ spanId: (0x1000000 + from + i).toString(16).padStart(16, '0') })));
    assert.equal((await relay('h', many(0))).status, 200);
    assert.equal((await relay('h', many(4000))).status, 200);
    const over = await relay('h', many(8000));
    assert.equal(over.status, 413);
    assert.equal((await relay('h', otlpBody('svc-run', [span()]))).status, 200, 'what still fits goes on');
  });
});

describe('a gate with tracing off', () => {
  it('makes no span and sends no traceparent, and relays nothing', async () => {
    const upstream = await startUpstream('127.0.0.2');
    const off = new Tracer(traceSettings({}, 'svc-run'));
    const on = new Tracer(traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }, 'svc-run'));
    const policy = parseGatePolicy({ allow: [`127.0.0.2:${upstream.port}`] });
    const parent = { traceId: TRACE, spanId: JOB_SPAN };
    const gates: Gate[] = [];
    try {
      for (const tracer of [on, off]) {
        const gate = await startGate({ policy, tcpPort: 0, connect: recordingConnect().connect,
          clients: { secret: SECRET, maxPerClient: 8, policyFor: () => policy }, trace: { tracer, parent: null } });
        gates.push(gate);
        // The client's own traceparent is dropped either way.
        const headers = { 'proxy-authorization': `Basic ${Buffer.from(`svc:${cred('i')}`).toString('base64')}`,
          traceparent: `00-a1b2c3d4e5f60718293a4b5c6d7e8f90-${JOB_SPAN}-01` };
        const answer = await gateRequest({ port: gate.port! }, `http://127.0.0.2:${upstream.port}/x`, { headers });
        assert.equal(answer.status, 200);
      }
      const [traced, untraced] = upstream.seen.map((s) => s.headers.traceparent);
      assert.match(String(traced), new RegExp(`^00-${TRACE}-`));
      assert.equal(untraced, undefined);
      const relayed = await gateRequest({ port: gates[1]!.port! }, `/_job/${cred('i')}/_traces`,
        { method: 'POST', body: otlpBody('svc-run', [span()]) });
      assert.equal(relayed.status, 404);
      // A run's own gate, given its run's span while its tracer exports nothing, passes none on either.
      const own = await startGate({ policy, tcpPort: 0, connect: recordingConnect().connect,
        trace: { tracer: off, parent } });
      gates.push(own);
      assert.equal((await gateRequest({ port: own.port! }, `http://127.0.0.2:${upstream.port}/y`)).status, 200);
      assert.equal(upstream.seen.at(-1)?.headers.traceparent, undefined);
    } finally {
      for (const gate of gates) await gate.close();
      await upstream.close();
    }
  });
});

describe('a gate whose collector takes nothing', () => {
  it('answers the pod 502, and records the relay with that status and the bytes it tried to send', async () => {
    const down = new Tracer(traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }, 'svc-gate'));
    const policy = parseGatePolicy({});
    const records: EgressRecord[] = [];
    const gate = await startGate({ policy, tcpPort: 0, connect: recordingConnect().connect,
      onRecord: (r) => records.push(r), clients: { secret: SECRET, maxPerClient: 8, policyFor: () => policy },
      trace: { tracer: down, parent: null } });
    try {
      const answer = await gateRequest({ port: gate.port! }, `/_job/${cred('k')}/_traces`,
        { method: 'POST', body: otlpBody('svc-run', [span()]) });
      assert.equal(answer.status, 502);
      assert.equal(answer.body, 'svc gate: the collector did not take them\n');
      const relay = records.find((r) => r.kind === 'traces');
      assert.deepEqual([relay?.status, relay?.reason, relay?.host, relay?.port],
        [502, 'the collector did not take them', '127.0.0.1', 9]);
      assert.ok((relay?.bytesUp ?? 0) > 0);
    } finally {
      await gate.close();
    }
  });
});
