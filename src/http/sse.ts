// Server-Sent Events writer: `id:` per event, a comment ping so proxies keep the stream open, clean close.
import type { ServerResponse } from 'node:http';

export interface SseStream {
  send(id: number | string, event: string, data: unknown): boolean;
  comment(text: string): void;
  close(): void;
  readonly closed: boolean;
  onClose(fn: () => void): void;
}

export interface SseOptions {
  heartbeatMs?: number;
  /** Tells the browser how long to wait before reconnecting. */
  retryMs?: number;
}

export function openSse(res: ServerResponse, { heartbeatMs = 15_000, retryMs = 2_000 }: SseOptions = {}): SseStream {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    connection: 'keep-alive',
    'x-content-type-options': 'nosniff',
    'x-accel-buffering': 'no',
  });
  // HEAD gets the headers and ends: a body-less response sends nothing on write(), so an open HEAD stream would hang.
  const head = res.req?.method === 'HEAD';
  if (head) res.end();
  else res.write(`retry: ${retryMs}\n\n`);
  let closed = head;
  const closers: Array<() => void> = [];
  const timer = head
    ? undefined
    : setInterval(() => {
        if (!closed) res.write(': ping\n\n');
      }, heartbeatMs);
  timer?.unref();
  function shutdown(): void {
    if (closed) return;
    closed = true;
    clearInterval(timer);
    for (const fn of closers.splice(0)) fn();
  }
  res.on('close', shutdown);
  return {
    send(id, event, data) {
      if (closed) return false;
      const payload = typeof data === 'string' ? data : JSON.stringify(data);
      // Data may not carry raw newlines; JSON never does, plain strings are split per the SSE grammar.
      const lines = payload.split(/\r\n|\r|\n/).map((l) => `data: ${l}`).join('\n');
      return res.write(`id: ${id}\nevent: ${event.replace(/[\r\n]/g, '')}\n${lines}\n\n`);
    },
    comment(text) {
      if (!closed) res.write(`: ${text.replace(/[\r\n]/g, ' ')}\n\n`);
    },
    close() {
      if (closed) return;
      shutdown();
      res.end();
    },
    get closed() {
      return closed;
    },
    onClose(fn) {
      if (closed) fn();
      else closers.push(fn);
    },
  };
}
