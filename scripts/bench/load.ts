// Closed-loop load: N keep-alive connections, each sends its next request as soon as the previous answer
// arrives, for a bounded time (and optionally a bounded count). Runs inside the load-worker process only.
import { performance } from 'node:perf_hooks';
import { openConnection, encodeRequest } from './raw-client.ts';
import { createRequestMaker, type MadeRequest, type RequestKind } from './request-makers.ts';
import { summarize, type LatencySummary } from './stats.ts';

export interface LoadJob {
  url: string;
  connections: number;
  warmupMs: number;
  durationMs: number;
  /** Each connection sends at most once per this many ms, as a runner's ship loop ticks (0 = as soon as answered). */
  intervalMs?: number;
  /** Also summarise apart the requests sent in the window's first `splitMs`, and those sent later. */
  splitMs?: number;
  /** Stop early once this many measured requests completed (0 = no cap). */
  maxRequests?: number;
  request: RequestKind;
  /** Statuses that count as success; anything else is reported under `unexpected`. */
  expect: number[];
}

export interface LoadResult {
  requests: number;
  seconds: number;
  rps: number;
  /** Units of work per second (events for ingest, requests otherwise). */
  unitsPerSecond: number;
  latencyMs: LatencySummary;
  /** With `splitMs`: the latencies of requests sent before it, and of those sent after. */
  split?: { before: LatencySummary; after: LatencySummary };
  statuses: Record<string, number>;
  unexpected: number;
  /** First unexpected body, cut short, so a failing figure explains itself. */
  sample?: string;
}

/** Signed webhook deliveries are made before the clock starts, up to this many bytes (a round that needs more makes
 * the rest as it goes). */
const PREMADE_BYTES = 128 * 1024 * 1024;
/** A request ready to send: its bytes, and the units of work it carries. */
type Ready = { bytes: Buffer; units: number };
const SIGNED_KINDS: ReadonlySet<RequestKind['kind']> = new Set(['github', 'trackerb']);

export async function runLoad(job: LoadJob): Promise<LoadResult> {
  const target = new URL(job.url);
  const host = target.host;
  const port = Number(target.port);
  const make = createRequestMaker(job.request);
  // Fixed requests (GETs) come back as the same object: encode them once.
  const encoded = new WeakMap<object, Buffer>();
  function bytesOf(spec: Parameters<typeof encodeRequest>[1]): Buffer {
    let bytes = encoded.get(spec);
    if (!bytes) {
      bytes = encodeRequest(host, spec);
      encoded.set(spec, bytes);
    }
    return bytes;
  }
  const ready = (made: MadeRequest): Ready => ({ bytes: bytesOf(made.spec), units: made.units });
  // The sender signs a webhook on its own machine; here making, signing and encoding each delivery inside the round
  // was about a third of the load generator's CPU, on the two cores the server under test has, and more of it the
  // faster that server answers (docs/bench-history.md, "The peer row: where a delivery's CPU goes").
  const premade: Ready[] = [];
  const most = job.maxRequests || Number.POSITIVE_INFINITY;
  let premadeBytes = 0;
  while (SIGNED_KINDS.has(job.request.kind) && premadeBytes < PREMADE_BYTES && premade.length < most) {
    const made = make(0);
    const bytes = encodeRequest(host, made.spec);
    premade.push({ bytes, units: made.units });
    premadeBytes += bytes.length;
  }
  let taken = 0;
  const connections = await Promise.all(
    Array.from({ length: job.connections }, () => openConnection(target.hostname, port)));
  const latencies: number[] = [];
  /** Each measured request's send time from the window's start, for `splitMs`. */
  const sent: number[] = [];
  const statuses: Record<string, number> = {};
  let unexpected = 0;
  let units = 0;
  let sample: string | undefined;
  const startedAt = performance.now();
  const measureFrom = startedAt + job.warmupMs;
  const stopAt = measureFrom + job.durationMs;
  const cap = job.maxRequests ?? 0;
  let done = false;

  async function loop(index: number): Promise<void> {
    const conn = connections[index];
    if (!conn) return;
    let sentAt = 0;
    while (!done) {
      const wait = sentAt + (job.intervalMs ?? 0) - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (done) break;
      sentAt = performance.now();
      const next = taken < premade.length ? premade[taken++]! : ready(make(index));
      const bytes = next.bytes;
      const t0 = performance.now();
      const response = await conn.request(bytes);
      const t1 = performance.now();
      if (t1 >= stopAt) done = true;
      if (t0 < measureFrom || t1 > stopAt) continue;
      latencies.push(t1 - t0);
      sent.push(t0 - measureFrom);
      const key = String(response.status);
      statuses[key] = (statuses[key] ?? 0) + 1;
      if (job.expect.includes(response.status)) units += next.units;
      else {
        unexpected += 1;
        sample ??= response.body.toString('utf8', 0, Math.min(response.body.length, 300));
      }
      if (cap > 0 && latencies.length >= cap) done = true;
    }
  }

  await Promise.all(connections.map((_, i) => loop(i)));
  const endedAt = Math.min(performance.now(), stopAt);
  for (const c of connections) c.close();
  const seconds = Math.max(0.001, (endedAt - measureFrom) / 1000);
  const ok = latencies.length - unexpected;
  return {
    requests: latencies.length,
    seconds,
    rps: ok / seconds,
    unitsPerSecond: units / seconds,
    latencyMs: summarize(latencies),
    ...(job.splitMs ? {
      split: {
        before: summarize(latencies.filter((_, i) => sent[i]! < job.splitMs!)),
        after: summarize(latencies.filter((_, i) => sent[i]! >= job.splitMs!)),
      },
    } : {}),
    statuses,
    unexpected,
    ...(sample !== undefined ? { sample } : {}),
  };
}
