// Builds each request the load generator sends, from a plain JSON description (it crosses a process
// boundary). Bodies that must not be deduplicated (ingest seqs, webhooks, jobs) are unique per request.
import { createHmac } from 'node:crypto';
import type { RequestSpec } from './raw-client.ts';
import { epochMs } from './sse-subscribers.ts';

export type RequestKind =
  | { kind: 'get'; path: string; headers?: Record<string, string> }
  /** A GET whose path differs on every request: `@@N@@` becomes base − n (n = 1, 2, …), e.g. to defeat a response
   * cache. */
  | { kind: 'get-unique'; path: string; base: number }
  /** `perSecond`: each connection's batch is the events its run wrote since its last one (at 500 at most), as a
   * shipper. */
  | { kind: 'ingest'; batch: number; source: string; token?: string; perSecond?: number }
  | { kind: 'jobs'; token: string }
  | { kind: 'trackerb'; secret: string; template: unknown }
  /** Source-host `issues` deliveries to POST /webhook, signed X-Hub-Signature-256, each a new issue and delivery id. */
  | { kind: 'github'; secret: string; template: unknown }
  /** POST /v1/ingest carrying `batch` new runs (no events) per request: fills a Control Plane over HTTP. */
  | { kind: 'ingest-runs'; batch: number; source: string };

export interface MadeRequest {
  spec: RequestSpec;
  /** How many units of work the request carries (events for ingest). */
  units: number;
}

export type RequestMaker = (connection: number) => MadeRequest;

const JSON_HEADERS = { 'content-type': 'application/json' };
/** One key for every bench run: each run binds it on its first batch, as a worker's own key would. */
const BENCH_RUN_KEY = 'bench-run-key-0123456789abcdefghijklmnopqrstuv';

function bearer(token: string | undefined): Record<string, string> {
  return token ? { authorization: `Bearer ${token}` } : {};
}

/**
 * One run per connection, shipped as a runner's shipper ships it (its Run JSON and its next events); seqs keep rising
 * so every event is new (ingest is idempotent on source,run,seq). Each event carries its send time for SSE lag.
 */
function ingestMaker(fixed: number, source: string, token: string | undefined, perSecond = 0): RequestMaker {
  const stamp = Date.now().toString(36);
  const seqs = new Map<number, number>();
  const lastAt = new Map<number, number>();
  const text = 'bench output line: compiling module, running checks, writing artifacts';
  return (connection) => {
    const run = `rbench${stamp}c${connection}`;
    const first = seqs.get(connection) ?? 0;
    const at = performance.now();
    const last = lastAt.get(connection);
    lastAt.set(connection, at);
    const due = last === undefined ? fixed : Math.round((perSecond * (at - last)) / 1000);
    const batch = perSecond ? Math.max(1, Math.min(500, due)) : fixed;
    seqs.set(connection, first + batch);
    const now = Date.now();
    const ts = new Date(now).toISOString();
    const sent = epochMs();
    const events = [];
    for (let i = 0; i < batch; i++) {
      const data = { stream: 'stdout', text: `${text} #${first + i + 1}`, bench_t: sent };
      events.push({ run, seq: first + i + 1, ts, kind: 'log', data });
    }
    const runJson = {
      run, repo: 'bench/ingest', group_id: run, status: 'running', verdict: null, brief: 'ingest bench',
      origin: 'bench', provider: 'command', branch: `svc/${run}`, pr_url: null, question: null, started_at: ts,
      ended_at: null, updated_at: ts,
      cost_usd: null, tokens_in: null, tokens_out: null, exit_code: null, error: null,
      // As the shipper sends it: the Control Plane checks the run's key on every batch (docs/control-data.md).
      run_key: BENCH_RUN_KEY,
    };
    const body = JSON.stringify({ source, runs: [runJson], events, artifacts: [] });
    const headers = { ...JSON_HEADERS, ...bearer(token) };
    return { spec: { method: 'POST', path: '/v1/ingest', headers, body }, units: batch };
  };
}

function jobsMaker(token: string): RequestMaker {
  let n = 0;
  const stamp = Date.now().toString(36);
  return () => {
    n += 1;
    const body = JSON.stringify({ brief: `Bench job ${stamp}-${n}: fix the flaky retry in the upload client` });
    const headers = { ...JSON_HEADERS, authorization: `Bearer ${token}` };
    return { spec: { method: 'POST', path: '/jobs', headers, body }, units: 1 };
  };
}

/** A real trackerb (Jira-style) delivery with a fresh issue key and delivery id, signed as X-Hub-Signature. */
function trackerbMaker(secret: string, template: unknown): RequestMaker {
  let n = 0;
  const stamp = Date.now().toString(36);
  // Serialise once with placeholders and splice per request: the generator must stay cheaper than the server.
  const payload = JSON.parse(JSON.stringify(template)) as
    { timestamp?: unknown; issue?: { id?: string; key?: string } };
  payload.timestamp = '@@TS@@';
  if (payload.issue) {
    payload.issue.key = 'BENCH-@@N@@';
    payload.issue.id = '@@ID@@';
  }
  const parts = JSON.stringify(payload).split(/("@@TS@@"|@@N@@|@@ID@@)/);
  return () => {
    n += 1;
    const values: Record<string, string> = {
      '"@@TS@@"': String(Date.now()), '@@N@@': String(n), '@@ID@@': `${stamp}${n}`,
    };
    const body = parts.map((p) => values[p] ?? p).join('');
    const signature = createHmac('sha256', secret).update(body).digest('hex');
    const headers = {
      ...JSON_HEADERS,
      'x-hub-signature': `sha256=${signature}`,
      'x-vendorb-webhook-identifier': `bench-${stamp}-${n}`,
    };
    return { spec: { method: 'POST', path: '/trackerb', headers, body }, units: 1 };
  };
}

/** A GitHub `issues` delivery with a new issue number and X-GitHub-Delivery, signed as X-Hub-Signature-256. */
function githubMaker(secret: string, template: unknown): RequestMaker {
  let n = 0;
  const stamp = Date.now().toString(36);
  const parts = JSON.stringify(template).split(/("@@N@@"|@@N@@|"@@ID@@"|@@NODE@@)/);
  const idBase = Date.now() * 1000;
  return () => {
    n += 1;
    // id and node_id carry this maker's start time, so bodies and issues stay unique across rounds (each round makes a
    // new maker): svc dedupes the label an issue was opened with by the issue's own id, as GitHub's ids are global.
    const values: Record<string, string> = {
      '"@@N@@"': String(n), '@@N@@': String(n), '"@@ID@@"': String(idBase + n), '@@NODE@@': `I_kw${stamp}${n}`,
    };
    const body = parts.map((p) => values[p] ?? p).join('');
    const signature = createHmac('sha256', secret).update(body).digest('hex');
    const headers = {
      ...JSON_HEADERS,
      'x-hub-signature-256': `sha256=${signature}`,
      'x-github-event': 'issues',
      'x-github-delivery': `bench-${stamp}-${n}`,
    };
    return { spec: { method: 'POST', path: '/webhook', headers, body }, units: 1 };
  };
}

/** Batches of new terminal runs, newest last, as an engine would ship them. */
function ingestRunsMaker(batch: number, source: string): RequestMaker {
  let n = 0;
  const base = Date.now() - 30 * 86_400_000;
  return () => {
    const runs = [];
    for (let i = 0; i < batch; i++) {
      n += 1;
      const started = new Date(base + n * 1000).toISOString();
      const ended = new Date(base + n * 1000 + 600_000).toISOString();
      const run = `rworked${String(n).padStart(10, '0')}`;
      runs.push({
        run, repo: `acme/r${n % 30}`, group_id: run, status: n % 5 ? 'succeeded' : 'failed',
        verdict: n % 5 ? 'verified' : 'not_verified', brief: `Fix the flaky retry in the upload client (#${n})`,
        origin: 'cli', provider: 'claude', branch: `svc/${run}`, pr_url: null, question: null, started_at: started,
        ended_at: ended, updated_at: ended, cost_usd: (n % 400) / 100,
        tokens_in: 10_000 + n % 5000, tokens_out: 1000 + n % 500, exit_code: n % 5 ? 0 : 1, error: null,
      });
    }
    const body = JSON.stringify({ source, runs, events: [], artifacts: [] });
    return { spec: { method: 'POST', path: '/v1/ingest', headers: JSON_HEADERS, body }, units: batch };
  };
}

export function createRequestMaker(kind: RequestKind): RequestMaker {
  switch (kind.kind) {
    case 'get': {
      const made: MadeRequest = { spec: { method: 'GET', path: kind.path, headers: kind.headers ?? {} }, units: 1 };
      return () => made;
    }
    case 'get-unique': {
      const [before, after = ''] = kind.path.split('@@N@@');
      let n = 0;
      return () => ({ spec: { method: 'GET', path: `${before}${kind.base - ++n}${after}`, headers: {} }, units: 1 });
    }
    case 'ingest':
      return ingestMaker(kind.batch, kind.source, kind.token, kind.perSecond);
    case 'jobs':
      return jobsMaker(kind.token);
    case 'trackerb':
      return trackerbMaker(kind.secret, kind.template);
    case 'github':
      return githubMaker(kind.secret, kind.template);
    case 'ingest-runs':
      return ingestRunsMaker(kind.batch, kind.source);
  }
}
