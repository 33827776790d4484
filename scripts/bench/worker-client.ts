// Parent side of the load generator: forks load-worker.ts with the pinned Node and talks to it over IPC.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { LoadJob, LoadResult } from './load.ts';
import { HISTOGRAM_RANGE_MS, HISTOGRAM_RESOLUTION_MS, type SseJob, type SseResult } from './sse-subscribers.ts';
import { createHistogram } from './stats.ts';

const WORKER = fileURLToPath(new URL('./load-worker.ts', import.meta.url));

export const NODE_FLAGS = ['--disable-warning=ExperimentalWarning'];

function spawnWorker(): ChildProcess {
  const stdio = ['ignore', 'inherit', 'inherit', 'ipc'] as const;
  return fork(WORKER, [], { execPath: process.execPath, execArgv: NODE_FLAGS, stdio: [...stdio] });
}

function nextMessage<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    function onMessage(raw: unknown): void {
      const message = raw as { type: string; message?: string };
      if (message.type === 'error') finish(() => reject(new Error(`load worker: ${message.message}`)));
      else if (message.type === type) finish(() => resolve(message as T));
    }
    function onExit(code: number | null): void {
      finish(() => reject(new Error(`load worker exited (${code}) before sending ${type}`)));
    }
    function finish(fn: () => void): void {
      child.off('message', onMessage);
      child.off('exit', onExit);
      fn();
    }
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}

/** Runs one closed-loop load job in a fresh worker process. */
export async function runLoadInWorker(job: LoadJob): Promise<LoadResult> {
  const child = spawnWorker();
  const done = nextMessage<{ result: LoadResult }>(child, 'result');
  child.send({ type: 'load', job });
  const { result } = await done;
  // A round with no measured request has NaN latencies, which cross IPC as null (JSON): the fan-in's log line then
  // threw on `null.toFixed` on a machine at load 17-21. NaN again, so such a row reads n/a and fails its bar.
  const latency = result.latencyMs as unknown as Record<string, number | null>;
  for (const key of Object.keys(latency)) latency[key] ??= Number.NaN;
  return result;
}

export interface SseSession {
  connected: number;
  failed: number;
  /** Waits until every connected subscriber has `eventsEach` deliveries (or graceMs passed) and merges the results. */
  finish(eventsEach: number, graceMs: number): Promise<SseResult>;
}

/**
 * Opens SSE subscribers spread over `processes` worker processes (round-robin shares); resolves once all of them have
 * their response headers. One process parsing every frame of 1,000 subscribers × 1,000 events/s would measure its
 * own backlog; several processes keep each event loop's sweep over its sockets short. Every frame is still counted.
 */
export async function openSseInWorkers(job: SseJob, processes: number): Promise<SseSession> {
  const count = Math.max(1, Math.min(processes, job.subscribers));
  const shares = Array.from({ length: count },
    (_, i) => Math.floor(job.subscribers / count) + (i < job.subscribers % count ? 1 : 0));
  const workers = await Promise.all(
    shares.map(async (subscribers) => {
      const child = spawnWorker();
      const ready = nextMessage<{ connected: number; failed: number }>(child, 'ready');
      child.send({ type: 'sse', job: { ...job, subscribers } });
      return { child, ...(await ready) };
    }),
  );
  const connected = workers.reduce((n, w) => n + w.connected, 0);
  const failed = workers.reduce((n, w) => n + w.failed, 0);
  return {
    connected,
    failed,
    async finish(eventsEach, graceMs) {
      const results = await Promise.all(
        workers.map((w) => {
          const done = nextMessage<{ result: SseResult }>(w.child, 'result');
          w.child.send({ type: 'finish', total: eventsEach * w.connected, graceMs });
          return done.then((m) => m.result);
        }),
      );
      const merged = createHistogram(HISTOGRAM_RESOLUTION_MS, HISTOGRAM_RANGE_MS);
      for (const r of results) merged.merge(r.histogram);
      return {
        connected,
        failed,
        delivered: merged.count,
        reconnects: results.reduce((n, r) => n + r.reconnects, 0),
        p50: merged.percentile(50),
        p99: merged.percentile(99),
        max: merged.max(),
        histogram: merged.export(),
      };
    },
  };
}
