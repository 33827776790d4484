// SSE fan-out: N subscribers on /v1/stream (in the load worker), events published through /v1/ingest at a
// fixed rate from this process, each carrying its publish time; latency = receive time − publish time.
import { join } from 'node:path';
import { startControl } from './processes.ts';
import { openSseInWorkers } from './worker-client.ts';
import { openConnection, encodeRequest } from './raw-client.ts';
import { epochMs } from './sse-subscribers.ts';
import { meetsBar } from './stats.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

const RATE = 1000;
const TICK_MS = 10;
/** Subscriber processes: 250 subscribers (250k frames/s at the full rate) per process at most. */
const SUBSCRIBERS_PER_PROCESS = 250;

async function publish(url: string, seconds: number): Promise<number> {
  const target = new URL(url);
  const conn = await openConnection(target.hostname, Number(target.port));
  const run = `rssebench${Date.now().toString(36)}`;
  const total = Math.round(RATE * seconds);
  const perTick = (RATE * TICK_MS) / 1000;
  const start = performance.now();
  let seq = 0;
  try {
    while (seq < total) {
      // Send whatever is due by now, so a slow answer never lowers the average rate.
      const due = Math.min(total, Math.floor(((performance.now() - start) / TICK_MS + 1) * perTick));
      if (due > seq) {
        const ts = new Date().toISOString();
        const events = [];
        for (; seq < due; ) {
          seq += 1;
          const data = { stream: 'stdout', text: `sse bench ${seq}`, bench_t: epochMs() };
          events.push({ run, seq, ts, kind: 'log', data });
        }
        const runJson = {
          run, repo: 'bench/sse', group_id: run, status: 'running', started_at: ts, updated_at: ts, brief: 'sse bench',
        };
        const body = JSON.stringify({ source: 'bench', runs: [runJson], events, artifacts: [] });
        const headers = { 'content-type': 'application/json' };
        const request = encodeRequest(target.host, { method: 'POST', path: '/v1/ingest', headers, body });
        const answer = await conn.request(request);
        if (answer.status !== 200) {
          throw new Error(`ingest answered ${answer.status}: ${answer.body.toString().slice(0, 300)}`);
        }
      }
      const next = start + (Math.floor(seq / perTick) + 1) * TICK_MS - performance.now();
      if (next > 0) await new Promise((r) => setTimeout(r, next));
    }
  } finally {
    conn.close();
  }
  return seq;
}

export async function measureSse(ctx: BenchContext): Promise<Row[]> {
  const subscribers = ctx.options.quick ? 200 : 1000;
  const seconds = ctx.options.quick ? 3 : 10;
  const control = await startControl(join(ctx.tmp, 'sse.db'), ctx.env);
  try {
    const processes = Math.ceil(subscribers / SUBSCRIBERS_PER_PROCESS);
    const session = await openSseInWorkers({ url: control.url, path: '/v1/stream', subscribers }, processes);
    ctx.log(`SSE: ${session.connected} subscribers connected over ${processes} processes (${session.failed} ` +
      `failed); publishing ${RATE} events/s for ${seconds} s`);
    const published = await publish(control.url, seconds);
    const expected = published * session.connected;
    const result = await session.finish(published, 5_000);
    const lost = expected - result.delivered;
    ctx.log(`SSE: delivered ${result.delivered}/${expected} p50 ${result.p50.toFixed(1)} ms ` +
      `p99 ${result.p99.toFixed(1)} ms max ${result.max.toFixed(0)} ms`);
    return [{
      figure: `SSE /v1/stream, ${subscribers} subscribers at ${RATE} events/s`, value: result.p99, unit: 'ms p99',
      p50Ms: result.p50, p99Ms: result.p99, bar: 'delivery p99 < 100 ms',
      pass: session.failed === 0 && lost === 0 && meetsBar(result.p99, { kind: 'max', value: 100 }),
      note: `${published} events × ${session.connected} subscribers (in ${processes} processes): ` +
        `${result.delivered} delivered (${lost} missing within 5 s), max ${result.max.toFixed(0)} ms`,
    }];
  } finally {
    await control.stop();
  }
}
