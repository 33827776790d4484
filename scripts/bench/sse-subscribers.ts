// Many SSE subscribers on raw sockets, measuring delivery latency from the publish time embedded in each
// event's data (`"bench_t":<epoch ms>`). Runs inside the load-worker process only.
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createHistogram, type HistogramData } from './stats.ts';

export interface SseJob {
  url: string;
  path: string;
  subscribers: number;
  headers?: Record<string, string>;
}

export interface SseResult {
  connected: number;
  failed: number;
  delivered: number;
  /** Streams the server cut off for lagging, opened again with Last-Event-ID. */
  reconnects: number;
  p50: number;
  p99: number;
  max: number;
  /** The whole histogram, so results of several subscriber processes merge exactly. */
  histogram: HistogramData;
}

/** Shared by every subscriber process so their histograms merge bucket by bucket. */
export const HISTOGRAM_RESOLUTION_MS = 0.1;
export const HISTOGRAM_RANGE_MS = 30_000;

export interface Subscribers {
  connected: number;
  failed: number;
  delivered(): number;
  /** Waits until `total` deliveries arrived or `graceMs` passed, then closes every socket. */
  finish(total: number, graceMs: number): Promise<SseResult>;
}

/** High-resolution wall clock shared by publisher and subscribers (both on this machine). */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

const MARK = Buffer.from('"bench_t":');

export async function openSubscribers(job: SseJob): Promise<Subscribers> {
  const target = new URL(job.url);
  const histogram = createHistogram(HISTOGRAM_RESOLUTION_MS, HISTOGRAM_RANGE_MS);
  const sockets: Socket[] = [];
  let extra = '';
  for (const [k, v] of Object.entries(job.headers ?? {})) extra += `${k}: ${v}\r\n`;
  const request =
    Buffer.from(`GET ${job.path} HTTP/1.1\r\nhost: ${target.host}\r\naccept: text/event-stream\r\n${extra}\r\n`);

  // Reads the number after each mark straight from the bytes (no string per event): at 1M deliveries a second the
  // subscriber process must stay cheap, or its own backlog is what the histogram measures.
  function scan(chunk: Buffer, now: number): void {
    let at = chunk.indexOf(MARK);
    while (at >= 0) {
      let end = at + MARK.length;
      let whole = 0;
      let c = chunk[end]!;
      while (end < chunk.length && c >= 48 && c <= 57) {
        whole = whole * 10 + (c - 48);
        c = chunk[++end]!;
      }
      let fraction = 0;
      if (c === 46) {
        let scale = 0.1;
        c = chunk[++end]!;
        while (end < chunk.length && c >= 48 && c <= 57) {
          fraction += (c - 48) * scale;
          scale /= 10;
          c = chunk[++end]!;
        }
      }
      histogram.add(now - (whole + fraction));
      at = chunk.indexOf(MARK, end);
    }
  }

  let finished = false;
  let reconnects = 0;
  const ID = Buffer.from('id: ');

  /**
   * One subscriber. A stream the server cut off for lagging (its reader fell 4 MB behind) is opened again with
   * Last-Event-ID, as EventSource does, so only an event never delivered even then counts as lost.
   */
  function subscribe(lastId = ''): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = connect(Number(target.port), target.hostname);
      socket.setNoDelay(true);
      sockets.push(socket);
      let headerDone = false;
      let carry: Buffer | undefined;
      let last = lastId;
      socket.on('error', () => resolve(false));
      socket.on('close', () => {
        resolve(false);
        if (headerDone && !finished) {
          reconnects += 1;
          void subscribe(last);
        }
      });
      socket.on('connect', () => socket.write(lastId
        ? Buffer.concat([request.subarray(0, request.length - 2), Buffer.from(`last-event-id: ${lastId}\r\n\r\n`)])
        : request));
      socket.on('data', (data: Buffer) => {
        const now = epochMs();
        let buf = carry ? Buffer.concat([carry, data]) : data;
        if (!headerDone) {
          const end = buf.indexOf('\r\n\r\n');
          if (end < 0) {
            carry = buf;
            return;
          }
          if (!buf.toString('latin1', 0, 12).endsWith('200')) {
            socket.destroy();
            resolve(false);
            return;
          }
          headerDone = true;
          resolve(true);
          buf = buf.subarray(end + 4);
        }
        // Only scan whole events; a TCP segment may end in the middle of a number.
        const whole = buf.lastIndexOf('\n\n');
        if (whole < 0) {
          carry = buf;
          return;
        }
        scan(buf.subarray(0, whole), now);
        const id = buf.lastIndexOf(ID, whole);
        if (id >= 0) last = buf.toString('latin1', id + ID.length, buf.indexOf(10, id));
        carry = whole + 2 < buf.length ? Buffer.from(buf.subarray(whole + 2)) : undefined;
      });
    });
  }

  const results: boolean[] = [];
  // Connect in waves so the listen backlog is never the thing being measured.
  for (let i = 0; i < job.subscribers; i += 100) {
    const wave = Array.from({ length: Math.min(100, job.subscribers - i) }, () => subscribe());
    results.push(...(await Promise.all(wave)));
  }
  const connected = results.filter(Boolean).length;

  return {
    connected,
    failed: results.length - connected,
    delivered: () => histogram.count,
    async finish(total, graceMs) {
      const deadline = Date.now() + graceMs;
      while (histogram.count < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      finished = true;
      for (const s of sockets) s.destroy();
      return {
        connected,
        failed: results.length - connected,
        delivered: histogram.count,
        reconnects,
        p50: histogram.percentile(50),
        p99: histogram.percentile(99),
        max: histogram.max(),
        histogram: histogram.export(),
      };
    },
  };
}
