// Parent side of the load generator: forks load-worker.ts with the pinned Node and talks to it over IPC.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { LoadJob, LoadResult } from './load.ts';
import type { SseJob, SseResult } from './sse-subscribers.ts';

const WORKER = fileURLToPath(new URL('./load-worker.ts', import.meta.url));

export const NODE_FLAGS = ['--disable-warning=ExperimentalWarning'];

function spawnWorker(): ChildProcess {
  return fork(WORKER, [], { execPath: process.execPath, execArgv: NODE_FLAGS, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
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
  return (await done).result;
}

export interface SseSession {
  connected: number;
  failed: number;
  finish(total: number, graceMs: number): Promise<SseResult>;
}

/** Opens SSE subscribers in a worker; resolves once all of them have their response headers. */
export async function openSseInWorker(job: SseJob): Promise<SseSession> {
  const child = spawnWorker();
  const ready = nextMessage<{ connected: number; failed: number }>(child, 'ready');
  child.send({ type: 'sse', job });
  const { connected, failed } = await ready;
  return {
    connected,
    failed,
    async finish(total, graceMs) {
      const done = nextMessage<{ result: SseResult }>(child, 'result');
      child.send({ type: 'finish', total, graceMs });
      return (await done).result;
    },
  };
}
