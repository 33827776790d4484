// GET /metrics on the Control Plane, the trigger server and `svc gate serve`, read by Prometheus's own parser
// (`promtool check metrics`, Debian package prometheus), and the access log SVC_ACCESS_LOG=1 turns on. Real servers on
// port 0 with temp HOMEs; jobs run through the trigger with the fake svc; the gate is the real CLI.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  request as httpRequest, createServer, type IncomingMessage, type Server, type ServerResponse,
} from 'node:http';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { startControl, type RunningControl } from '../../src/control/main.ts';
import { resolveControlSettings, type ControlSettings } from '../../src/control/settings.ts';
import { createLogger } from '../../src/log.ts';
import {
  MetricsRegistry, createModelUsage, escapeLabelValue, METRICS_TYPE,
} from '../../src/http/metrics.ts';
import { mintJobCredential } from '../../src/gate/job-credential.ts';
import { createGateMetrics, readMetricsToken } from '../../src/gate/metrics.ts';
import { arrivingRecord } from '../../src/gate/evidence.ts';
import { startGate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { SECRETS, get, post, sign, startTestTrigger, type TestTrigger } from '../trigger/helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { killGroup, pidIn } from '../helpers/pid-file.ts';

const PROMTOOL = spawnSync('promtool', ['--version']).status === 0;
if (process.env.CI && !PROMTOOL) {
  throw new Error('CI must check /metrics with promtool: install the Debian package prometheus');
}
const NO_PROMTOOL = PROMTOOL ? false : 'promtool is not installed (Debian package prometheus)';
const CLI = join(import.meta.dirname, '../../dist/cli.js');

/** Prometheus's own parser and linter over the text; and no series twice (promtool does not look for that). */
function promtoolCheck(text: string): void {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  assert.equal(r.status, 0, `promtool check metrics: ${r.stdout}${r.stderr}\n${text}`);
  const series = text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).map((l) => l.slice(0, l.lastIndexOf(' ')));
  assert.equal(new Set(series).size, series.length, 'a series is written twice');
}

function unescape(value: string): string {
  return value.replace(/\\(["\\n])/g, (_m, c: string) => (c === 'n' ? '\n' : c));
}

/** Every sample of the text: name, labels (unescaped) and value. */
function samples(text: string): Array<{ name: string; labels: Record<string, string>; value: number }> {
  const out: Array<{ name: string; labels: Record<string, string>; value: number }> = [];
  for (const line of text.split('\n')) {
    const m = /^([a-z_:][a-z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = unescape(l[2]!);
    out.push({ name: m[1]!, labels, value: m[3] === '+Inf' ? Infinity : Number(m[3]) });
  }
  return out;
}

/** The value of one series (0 when absent), its labels matched exactly. */
function value(text: string, name: string, labels: Record<string, string> = {}): number {
  const want = JSON.stringify(Object.entries(labels).sort());
  return samples(text).find((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === want)
    ?.value ?? 0;
}

/** A GET with headers fetch will not send as given (Host). */
function rawGet(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the metrics registry', () => {
  it('escapes backslashes, double quotes and line feeds in label values, and promtool reads them back', {
    skip: NO_PROMTOOL,
  }, () => {
    const registry = new MetricsRegistry();
    const hostile = 'a"b\\c\nd} e="f"';
    registry.counter('svc_test_things_total', 'Things with a "quoted" \\ help\nline', ['kind']).inc([hostile], 2);
    registry.gauge('svc_test_level', 'A level', ['kind'], () => [[[hostile], 1.5]]);
    registry.histogram('svc_test_wait_seconds', 'Waits', ['kind'], [0.1, 1]).observe([hostile], 0.5);
    const text = registry.render();
    promtoolCheck(text);
    assert.equal(escapeLabelValue(hostile), 'a\\"b\\\\c\\nd} e=\\"f\\"');
    assert.equal(value(text, 'svc_test_things_total', { kind: hostile }), 2);
    assert.equal(value(text, 'svc_test_wait_seconds_bucket', { kind: hostile, le: '0.1' }), 0);
    assert.equal(value(text, 'svc_test_wait_seconds_bucket', { kind: hostile, le: '1' }), 1);
    assert.equal(value(text, 'svc_test_wait_seconds_bucket', { kind: hostile, le: '+Inf' }), 1);
    assert.match(text, /# HELP svc_test_things_total Things with a "quoted" \\\\ help\\nline\n/);
  });

  it('refuses a name without the svc_ prefix, a repeated name and a label called le', () => {
    const registry = new MetricsRegistry();
    assert.throws(() => registry.counter('http_requests_total', 'x'), TypeError);
    registry.counter('svc_a_total', 'x');
    assert.throws(() => registry.counter('svc_a_total', 'x'), TypeError);
    assert.throws(() => registry.histogram('svc_b_seconds', 'x', ['le'], [1]), TypeError);
  });

  it('counts model use under a bounded model label: odd or long names are "other"', () => {
    const registry = new MetricsRegistry();
    const countModelUsage = createModelUsage(registry);
    countModelUsage('anthropic', 'claude-test-1', 120, 0.5);
    countModelUsage('anthropic', 'claude-test-1', 30, 0.25);
    countModelUsage('anthropic', 'evil"}\nsvc_fake 1', 7, 0);
    const text = registry.render();
    assert.equal(value(text, 'svc_gate_model_tokens_total', { provider: 'anthropic', model: 'claude-test-1' }), 150);
    assert.equal(value(text, 'svc_gate_model_cost_usd_total', { provider: 'anthropic', model: 'claude-test-1' }), 0.75);
    assert.equal(value(text, 'svc_gate_model_tokens_total', { provider: 'anthropic', model: 'other' }), 7);
    assert.doesNotMatch(text, /svc_fake/);
    if (PROMTOOL) promtoolCheck(text);
  });

  it('counts a gate record in the metrics before handing it on, so a sink that throws costs them nothing', async () => {
    const token = 'm'.repeat(16);
    const metrics = createGateMetrics(token, null);
    const gate = await startGate({ policy: parseGatePolicy({}), tcpPort: 0, metrics, onRecord: () => {
      throw new Error('the state folder cannot be written');
    } });
    try {
      const refused = await fetch(`http://127.0.0.1:${gate.port}/_model/none/v1/messages`, { method: 'POST' });
      assert.equal(refused.status, 403);
      const text = await waitFor(async () => {
        const s = await (await fetch(`http://127.0.0.1:${gate.port}/metrics`, {
          headers: { authorization: `Bearer ${token}` } })).text();
        return value(s, 'svc_gate_connections_total', { kind: 'model', decision: 'denied' }) === 1 ? s : null;
      }, 'the refused call to be counted');
      assert.ok(text);
    } finally {
      await gate.close();
    }
  });

  it('counts a gate call of unknown usage at its bound\'s cost, and none of its tokens', () => {
    const metrics = createGateMetrics('t'.repeat(16), null);
    const call = { model: 'claude-haiku-4-5', tokens_in: 10, tokens_out: 1000, cache_read: 0, cache_write: 0 };
    const record = arrivingRecord('model', { who: null }, { model: 'anthropic', decision: 'allowed', status: 200 });
    metrics.recorded({ ...record, metered: { ...call, usd: 0.25, unknown: null } });
    const cut = 'the response ended before its final usage';
    metrics.recorded({ ...record, metered: { ...call, usd: 0.5, unknown: cut } });
    let text = '';
    const res = { writeHead: () => res, end: (body: string) => (text = body) } as unknown as ServerResponse;
    const req = { url: '/metrics', method: 'GET', headers: { authorization: `Bearer ${'t'.repeat(16)}` }, socket: {},
      resume: () => {} } as unknown as IncomingMessage;
    assert.equal(metrics.answer(req, res), true);
    const labels = { provider: 'anthropic', model: 'claude-haiku-4-5' };
    assert.equal(value(text, 'svc_gate_model_tokens_total', labels), 1010);
    assert.equal(value(text, 'svc_gate_model_cost_usd_total', labels), 0.75);
  });
});

const CONTROL_TOKEN = 'control-metrics-token-0123456789';

interface Lines {
  lines: Array<Record<string, unknown>>;
  text(): string;
}

function capture(): Lines & { log: ReturnType<typeof createLogger> } {
  const lines: Array<Record<string, unknown>> = [];
  const raw: string[] = [];
  const log = createLogger('metrics-test', (line) => {
    raw.push(line);
    lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  return { log, lines, text: () => raw.join('') };
}

describe('GET /metrics on the Control Plane', () => {
  let dir: string;
  let running: RunningControl;
  const logs = capture();
  const auth = { authorization: `Bearer ${CONTROL_TOKEN}` };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-metrics-'));
    mkdirSync(join(dir, 'home'));
    const settings: ControlSettings = {
      ...resolveControlSettings({ HOME: join(dir, 'home') }, { port: '0', db: join(dir, 'control.db') }),
      token: CONTROL_TOKEN, answerDir: join(dir, 'answers'), accessLog: true,
    };
    running = await startControl(settings, { PATH: process.env.PATH, HOME: join(dir, 'home') }, logs.log);
  });

  after(async () => {
    await running.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function scrape(): Promise<string> {
    const res = await fetch(`${running.url}/metrics`, { headers: auth });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), METRICS_TYPE);
    return res.text();
  }

  /** A run shipped as a runner ships it: the run, then its status events, each batch on its own. */
  async function ingest(
    run: string, startedAt: number, events: Array<[number, number, string | null, string, object?]>,
  ) {
    const body = {
      source: 'local',
      runs: [{ run, status: events.at(-1)![3], started_at: new Date(startedAt).toISOString(),
        updated_at: new Date(events.at(-1)![1]).toISOString(), group_id: run, brief: 'secret brief text' }],
      events: events.map(([seq, ts, from, to, marks]) => ({ run, seq, ts: new Date(ts).toISOString(),
        kind: 'run.status', data: { from, to, ...marks } })),
      artifacts: [],
    };
    const res = await fetch(`${running.url}/v1/ingest`, {
      method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    assert.equal(res.status, 200, await res.text());
  }

  it('is Prometheus text 0.0.4 that promtool accepts, with every documented Control Plane series', {
    skip: NO_PROMTOOL,
  }, async () => {
    await fetch(`${running.url}/v1/runs?limit=5`, { headers: auth }).then((r) => r.text());
    const text = await scrape();
    promtoolCheck(text);
    for (const name of ['svc_http_requests_total', 'svc_http_request_duration_seconds', 'svc_control_runs',
      'svc_control_sse_subscribers', 'svc_db_size_bytes', 'svc_control_run_duration_seconds',
      'svc_control_time_to_agent_seconds']) {
      assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
    }
    assert.equal(value(text, 'svc_http_requests_total', { route: '/v1/runs', method: 'GET', status: '200' }), 1);
    assert.ok(value(text, 'svc_db_size_bytes', { file: 'db' }) > 0);
  });

  it('observes time to agent and run duration as runs arrive through ingest, and counts active runs', async () => {
    const before = await scrape();
    const t0 = Date.now() - 600_000;
    await ingest('rmetrics000001', t0, [[1, t0, null, 'queued'], [2, t0 + 1_500, 'queued', 'running']]);
    let text = await scrape();
    assert.equal(value(text, 'svc_control_time_to_agent_seconds_count') -
      value(before, 'svc_control_time_to_agent_seconds_count'), 1);
    assert.equal(value(text, 'svc_control_time_to_agent_seconds_bucket', { le: '1' }) -
      value(before, 'svc_control_time_to_agent_seconds_bucket', { le: '1' }), 0);
    assert.equal(value(text, 'svc_control_time_to_agent_seconds_bucket', { le: '2.5' }) -
      value(before, 'svc_control_time_to_agent_seconds_bucket', { le: '2.5' }), 1);
    assert.equal(value(text, 'svc_control_runs', { status: 'running' }), 1);
    // The same events shipped again are duplicates: observed once.
    await ingest('rmetrics000001', t0, [[1, t0, null, 'queued'], [2, t0 + 1_500, 'queued', 'running']]);
    await ingest('rmetrics000001', t0, [[3, t0 + 90_000, 'running', 'succeeded']]);
    text = await scrape();
    assert.equal(value(text, 'svc_control_time_to_agent_seconds_count') -
      value(before, 'svc_control_time_to_agent_seconds_count'), 1);
    assert.equal(value(text, 'svc_control_run_duration_seconds_count', { status: 'succeeded' }), 1);
    assert.equal(value(text, 'svc_control_run_duration_seconds_bucket', { status: 'succeeded', le: '60' }), 0);
    assert.equal(value(text, 'svc_control_run_duration_seconds_bucket', { status: 'succeeded', le: '120' }), 1);
    assert.equal(value(text, 'svc_control_runs', { status: 'running' }), 0);
    // No run id and no brief is ever a label.
    assert.doesNotMatch(text, /rmetrics000001|secret brief text/);
  });

  it('observes a resumed run\'s time to agent and end once, from its first start only', async () => {
    const before = await scrape();
    const t0 = Date.now() - 3 * 86_400_000;
    await ingest('rmetrics000003', t0, [[1, t0, null, 'queued'], [2, t0 + 500, 'queued', 'running'],
      [3, t0 + 90_000, 'running', 'stopped']]);
    // Resumed three days later (launch.ts: its launcher queues it, its worker runs it), then a resume whose worker did
    // not start: each of its moves says `resumed`.
    const resumed = { resumed: true };
    const later = Date.now() - 1_000;
    await ingest('rmetrics000003', t0, [[4, later, 'stopped', 'queued', resumed],
      [5, later + 200, 'queued', 'running', resumed], [6, later + 300, 'running', 'stopped'],
      [7, later + 400, 'stopped', 'queued', resumed], [8, later + 500, 'queued', 'stopped', resumed]]);
    const text = await scrape();
    const added = (name: string, labels?: Record<string, string>) =>
      value(text, name, labels) - value(before, name, labels);
    assert.equal(added('svc_control_time_to_agent_seconds_count'), 1);
    assert.equal(added('svc_control_time_to_agent_seconds_bucket', { le: '0.5' }), 1);
    assert.equal(added('svc_control_run_duration_seconds_count', { status: 'stopped' }), 2,
      'its first stop and its resume\'s, never the put-back of a resume that did not start');
  });

  it('times a status change from the run\'s stored start: shipped without its run, or with a later start', async () => {
    const t0 = Date.now() - 600_000;
    await ingest('rmetrics000002', t0, [[1, t0, null, 'queued']]);
    const before = await scrape();
    // A batch of events alone: the run is the one stored.
    const res = await fetch(`${running.url}/v1/ingest`, {
      method: 'POST', headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ source: 'local', runs: [], artifacts: [], events: [{ run: 'rmetrics000002', seq: 2,
        ts: new Date(t0 + 1_500).toISOString(), kind: 'run.status', data: { from: 'queued', to: 'running' } }] }),
    });
    assert.equal(res.status, 200, await res.text());
    let text = await scrape();
    assert.equal(value(text, 'svc_control_time_to_agent_seconds_bucket', { le: '2.5' }) -
      value(before, 'svc_control_time_to_agent_seconds_bucket', { le: '2.5' }), 1);
    assert.equal(value(text, 'svc_control_time_to_agent_seconds_bucket', { le: '1' }) -
      value(before, 'svc_control_time_to_agent_seconds_bucket', { le: '1' }), 0);
    // The runner stamps a later start of its own: the first one stored stays the run's start (90 s, not 30 s).
    await ingest('rmetrics000002', t0 + 60_000, [[3, t0 + 90_000, 'running', 'failed']]);
    text = await scrape();
    assert.equal(value(text, 'svc_control_run_duration_seconds_bucket', { status: 'failed', le: '60' }) -
      value(before, 'svc_control_run_duration_seconds_bucket', { status: 'failed', le: '60' }), 0);
    assert.equal(value(text, 'svc_control_run_duration_seconds_bucket', { status: 'failed', le: '120' }) -
      value(before, 'svc_control_run_duration_seconds_bucket', { status: 'failed', le: '120' }), 1);
  });

  it('counts an open event stream while it is open', async () => {
    const stream = await fetch(`${running.url}/v1/stream`, { headers: auth });
    assert.equal(stream.status, 200);
    assert.equal(value(await scrape(), 'svc_control_sse_subscribers'), 1);
    await stream.body?.cancel();
    await waitFor(async () => value(await scrape(), 'svc_control_sse_subscribers') === 0, 'the stream to close');
  });

  describe('security', () => {
    it('refuses /metrics without the token, with a wrong one, and under a foreign Host', async () => {
      const none = await fetch(`${running.url}/metrics`);
      assert.equal(none.status, 401);
      assert.equal(none.headers.get('www-authenticate'), 'Bearer');
      assert.equal((await fetch(`${running.url}/metrics`, { headers: { authorization: 'Bearer wrong' } })).status,
        401);
      const rebound = await rawGet(`${running.url}/metrics`, { ...auth, host: 'evil.example:80' });
      assert.equal(rebound.status, 403);
      assert.match(rebound.body, /forbidden_host/);
      assert.doesNotMatch(rebound.body, /svc_/);
    });

    it('writes one access log line per request, naming the route template, never the token or a query value', async () => {
      const query = 'cursor-capability-3f9a';
      const started = logs.lines.length;
      await fetch(`${running.url}/v1/runs?repo=${query}`, { headers: auth }).then((r) => r.text());
      await fetch(`${running.url}/v1/runs?cursor=${query}`, { headers: { authorization: `Bearer ${query}` } })
        .then((r) => r.text());
      await fetch(`${running.url}/nothing/here?${query}=1`).then((r) => r.text());
      const lines = await waitFor(() => {
        const mine = logs.lines.slice(started).filter((l) => l.msg === 'request');
        return mine.length >= 3 ? mine : null;
      }, 'three access log lines');
      assert.equal(lines.length, 3);
      assert.deepEqual(lines.map((l) => [l.method, l.route, l.status]),
        [['GET', '/v1/runs', 200], ['GET', '/v1/runs', 401], ['GET', 'unmatched', 404]]);
      for (const l of lines) {
        assert.equal(typeof l.duration_ms, 'number');
        assert.ok((l.bytes as number) > 0);
        assert.match(String(l.request_id), /^[0-9a-f-]{36}$/);
        assert.equal(l.peer, '127.0.0.1');
      }
      assert.doesNotMatch(logs.text(), new RegExp(`${query}|${CONTROL_TOKEN}|rmetrics000001`));
    });
  });
});

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

describe('GET /metrics on the trigger server', () => {
  let t: TestTrigger;
  let now = Date.now();
  const logs = capture();
  let hangPid = 0;

  before(async () => {
    t = await startTestTrigger({ SVC_TRIGGER_CONCURRENCY: '1', SVC_ACCESS_LOG: '1' },
      { clock: () => now, log: logs.log });
  });

  after(async () => {
    if (hangPid) killGroup(hangPid);
    await t.cleanup();
  });

  async function scrape(): Promise<string> {
    const res = await fetch(`${t.url}/metrics`, { headers: bearer });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), METRICS_TYPE);
    return res.text();
  }

  it('moves the queue depth and the oldest job\'s age as jobs queue and run', async () => {
    const repo = t.settings.repos.entries[0]!.name;
    assert.equal(value(await scrape(), 'svc_trigger_queue_depth', { repo }), 0);
    // The one slot is taken by a launcher that never returns, so the next jobs wait.
    const blocker = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'hang-forever' }), bearer);
    assert.equal(blocker.status, 202);
    const pidFile = join(t.home, 'fake-svc', 'hang.pid');
    hangPid = await waitFor(() => pidIn(pidFile), 'the blocking launcher');
    for (const brief of ['brief-alpha-7', 'brief-beta-7']) {
      assert.equal((await post(`${t.url}/jobs`, JSON.stringify({ brief }), bearer)).status, 202);
    }
    now += 5_000;
    let text = await scrape();
    assert.equal(value(text, 'svc_trigger_queue_depth', { repo }), 2);
    assert.equal(value(text, 'svc_trigger_queue_oldest_age_seconds', { repo }), 5);
    assert.equal(value(text, 'svc_trigger_jobs', { state: 'running' }), 1);
    assert.equal(value(text, 'svc_trigger_deliveries_total', { origin: 'jobs', outcome: 'queued' }), 3);
    if (PROMTOOL) promtoolCheck(text);
    // The blocker ends: the waiting jobs run (the fake svc's runs end at once) and the queue drains.
    killGroup(hangPid);
    text = await waitFor(async () => {
      const s = await scrape();
      return value(s, 'svc_trigger_jobs', { state: 'succeeded' }) === 2 ? s : null;
    }, 'the waiting jobs to run');
    assert.equal(value(text, 'svc_trigger_queue_depth', { repo }), 0);
    assert.equal(value(text, 'svc_trigger_queue_oldest_age_seconds', { repo }), 0);
    assert.equal(value(text, 'svc_trigger_jobs', { state: 'failed' }), 1);
    assert.doesNotMatch(text, /brief-alpha-7|brief-beta-7|hang-forever/);
  });

  it('counts deliveries by origin and outcome: duplicate, skipped and refused', async () => {
    const before = await scrape();
    const delta = (text: string, origin: string, outcome: string) =>
      value(text, 'svc_trigger_deliveries_total', { origin, outcome }) -
      value(before, 'svc_trigger_deliveries_total', { origin, outcome });
    const again = JSON.stringify({ brief: 'brief-alpha-7' });
    assert.equal((await post(`${t.url}/jobs`, again, bearer)).body.status, 'duplicate');
    const ping = Buffer.from(JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 }));
    const pinged = await post(`${t.url}/webhook`, ping, {
      'x-github-event': 'ping', 'x-hub-signature-256': `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, ping)}`,
    });
    assert.equal(pinged.body.status, 'skipped');
    assert.equal((await post(`${t.url}/webhook`, ping, { 'x-hub-signature-256': 'sha256=00' })).status, 401);
    // Signed, but not JSON: refused before the handler, counted all the same.
    const torn = Buffer.from('{"zen": ');
    const signed = `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, torn)}`;
    const headers = { 'x-github-event': 'ping', 'x-hub-signature-256': signed };
    const tornAnswer = await post(`${t.url}/webhook`, torn, headers);
    assert.equal((tornAnswer.body.error as { code: string }).code, 'invalid_json');
    assert.equal((await post(`${t.url}/jobs`, again, { authorization: 'Bearer wrong' })).status, 401);
    const text = await scrape();
    assert.equal(delta(text, 'jobs', 'duplicate'), 1);
    assert.equal(delta(text, 'webhook', 'skipped'), 1);
    assert.equal(delta(text, 'webhook', 'refused'), 2);
    assert.equal(delta(text, 'jobs', 'refused'), 1);
    assert.equal(delta(text, 'jobs', 'queued'), 0);
    assert.equal(value(text, 'svc_http_requests_total', { route: '/webhook', method: 'POST', status: '401' }), 1);
  });

  describe('security', () => {
    it('needs SVC_API_TOKEN\'s bearer when it is set: none or a wrong one is 401', async () => {
      assert.equal((await get(`${t.url}/metrics`)).status, 401);
      assert.equal((await get(`${t.url}/metrics`, { authorization: 'Bearer api-token-8' })).status, 401);
    });

    it('without SVC_API_TOKEN answers this machine under a loopback Host only (no DNS rebinding), logging no request', async () => {
      const open = await startTestTrigger({ SVC_API_TOKEN: undefined });
      try {
        const res = await fetch(`${open.url}/metrics`);
        assert.equal(res.status, 200);
        promtoolCheck(await res.text());
        const rebound = await rawGet(`${open.url}/metrics`, { host: 'rebound.example:7373' });
        assert.equal(rebound.status, 403);
        assert.match(rebound.body, /forbidden_host/);
        // SVC_ACCESS_LOG is off unless set: this server logged no request.
        assert.deepEqual(open.logs.filter((l) => l.msg === 'request'), []);
      } finally {
        await open.cleanup();
      }
    });

    it('logs each request once with its route template, never the token, a brief or a query value', async () => {
      const started = logs.lines.length;
      await post(`${t.url}/jobs?capability=q-secret-77`, JSON.stringify({ brief: 'brief-text-never-logged' }), bearer);
      await get(`${t.url}/jobs/j${'0'.repeat(26)}?capability=q-secret-77`, bearer);
      const lines = await waitFor(() => {
        const mine = logs.lines.slice(started).filter((l) => l.msg === 'request');
        return mine.length >= 2 ? mine : null;
      }, 'two access log lines');
      assert.deepEqual(lines.map((l) => [l.method, l.route, l.status]),
        [['POST', '/jobs', 202], ['GET', '/jobs/:id', 404]]);
      assert.doesNotMatch(logs.text(), new RegExp(`q-secret-77|brief-text-never-logged|${SECRETS.SVC_API_TOKEN}`));
    });
  });
});

describe('GET /metrics on svc gate serve', () => {
  const SECRET = 'gate-metrics-test-secret-0123456789abcdef';
  const TOKEN = 'gate-metrics-token-0123456789';
  const CREDENTIAL = mintJobCredential(Buffer.from(SECRET), { job: 'j-metrics', run: 'r-metrics', repo: 'acme/web' },
    Date.now() + 3600_000);
  let dir: string;
  let upstream: Server;
  let gate: ChildProcess;
  let port = 0;
  let out = '';
  let err = '';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-gate-metrics-'));
    upstream = createServer((req, res) => {
      req.resume();
      res.end('upstream says hello');
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.2', () => r()));
    const up = upstream.address() as AddressInfo;
    writeFileSync(join(dir, 'policy.json'), JSON.stringify({ allow: [`127.0.0.2:${up.port}`] }));
    writeFileSync(join(dir, 'gate-secret'), `${SECRET}\n`, { mode: 0o600 });
    writeFileSync(join(dir, 'metrics-token'), `${TOKEN}\n`, { mode: 0o600 });
    gate = spawn(process.execPath, [CLI, 'gate', 'serve', '--port', '0', '--policy', join(dir, 'policy.json')], {
      env: {
        PATH: process.env.PATH, HOME: dir, SVC_GATE_SECRET_FILE: join(dir, 'gate-secret'),
        SVC_GATE_METRICS_TOKEN_FILE: join(dir, 'metrics-token'), SVC_ACCESS_LOG: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    gate.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
    gate.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
    port = Number((await waitFor(() => /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out), 'the gate'))[1]);
  });

  after(() => {
    gate.kill('SIGTERM');
    upstream.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** An absolute-form request through the gate with the job's credential. */
  function viaGate(target: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const proxy = { 'proxy-authorization': `Basic ${Buffer.from(`svc:${CREDENTIAL}`).toString('base64')}` };
      const req = httpRequest({ host: '127.0.0.1', port, path: target, headers: proxy }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('counts connections by decision and bytes, and promtool accepts the text', { skip: NO_PROMTOOL }, async () => {
    const up = upstream.address() as AddressInfo;
    assert.equal(await viaGate(`http://127.0.0.2:${up.port}/hello`), 200);
    assert.equal(await viaGate('http://127.0.0.3:9/refused'), 403);
    const res = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), METRICS_TYPE);
    const text = await waitFor(async () => {
      const s = await (await fetch(`http://127.0.0.1:${port}/metrics`, {
        headers: { authorization: `Bearer ${TOKEN}` } })).text();
      return value(s, 'svc_gate_connections_total', { kind: 'http', decision: 'allowed' }) === 1 ? s : null;
    }, 'the allowed request to be counted');
    promtoolCheck(text);
    assert.equal(value(text, 'svc_gate_connections_total', { kind: 'http', decision: 'denied' }), 1);
    assert.ok(value(text, 'svc_gate_bytes_total', { direction: 'down' }) >= 'upstream says hello'.length);
    assert.equal(value(text, 'svc_http_requests_total', { route: 'http', method: 'GET', status: '403' }), 1);
    assert.match(text, /^# TYPE svc_gate_model_tokens_total counter$/m);
    assert.match(text, /^# TYPE svc_gate_model_cost_usd_total counter$/m);
    assert.doesNotMatch(text, new RegExp(`${CREDENTIAL.slice(0, 20)}|r-metrics|acme/web`));
  });

  describe('security', () => {
    it('refuses /metrics without the token or with a wrong one (401, not the proxy\'s 407), and a job credential',
      async () => {
        const none = await fetch(`http://127.0.0.1:${port}/metrics`);
        assert.equal(none.status, 401);
        assert.equal(none.headers.get('www-authenticate'), 'Bearer');
        assert.doesNotMatch(await none.text(), /svc_/);
        const wrong = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: 'Bearer nope' } });
        assert.equal(wrong.status, 401);
        const job = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${CREDENTIAL}`,
          'proxy-authorization': `Basic ${Buffer.from(`svc:${CREDENTIAL}`).toString('base64')}` } });
        assert.equal(job.status, 401);
        // Under the job's own path prefix it is an ordinary proxy request (407 without the credential header).
        const prefixed = await rawGet(`http://127.0.0.1:${port}/_job/${CREDENTIAL}/metrics`, {});
        assert.equal(prefixed.status, 407);
        assert.doesNotMatch(prefixed.body, /svc_/);
        const posted = await fetch(`http://127.0.0.1:${port}/metrics`, { method: 'POST' });
        assert.equal(posted.status, 405);
        assert.equal(posted.headers.get('allow'), 'GET, HEAD');
      });

    it('logs one access line per connection on stderr, never the credential, the token or the path', async () => {
      const lines = await waitFor(() => {
        const mine = err.split('\n').filter((l) => l.includes('"msg":"request"'));
        return mine.length >= 4 ? mine : null;
      }, 'access log lines');
      const first = JSON.parse(lines[0]!) as Record<string, unknown>;
      assert.deepEqual([first.method, first.route, first.status], ['GET', 'http', 200]);
      assert.doesNotMatch(err, new RegExp(`${CREDENTIAL.slice(2, 30)}|${TOKEN}|/hello|/refused`));
    });
  });
});

describe('the gate\'s metrics token file', () => {
  it('is refused when short, or when it is the gate\'s credential secret', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-gate-token-'));
    try {
      const secret = Buffer.from('gate-metrics-test-secret-0123456789abcdef');
      writeFileSync(join(dir, 'token'), 'short\n');
      assert.throws(() => readMetricsToken(join(dir, 'token'), secret), /at least 16 characters/);
      writeFileSync(join(dir, 'token'), `${secret.toString('utf8')}\n`);
      assert.throws(() => readMetricsToken(join(dir, 'token'), secret),
        { name: 'BadSettingError', message: 'SVC_GATE_METRICS_TOKEN_FILE: the token must differ from ' +
          'SVC_GATE_SECRET_FILE\'s secret' });
      writeFileSync(join(dir, 'token'), 'a-token-of-its-own-0123456789\nignored\n');
      assert.equal(readMetricsToken(join(dir, 'token'), secret), 'a-token-of-its-own-0123456789');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
