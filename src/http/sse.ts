// Server-Sent Events writer: `id:` per event, a comment ping so proxies keep the stream open, clean close, and the
// per-subscriber bound: a reader too far behind, or one that accepts nothing for a whole heartbeat, is cut off.
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** The lag bound: bytes written, not yet taken by the reader (docs/control-data.md, "Event JSON and streams"). */
const MAX_PENDING_BYTES = 4 * 1024 * 1024;
/** Corked bytes written out at once, however early in the turn: far below the lag bound. */
const CORKED_BYTES = 256 * 1024;
const HEARTBEAT_MS = 15_000;
/** How long the browser waits before reconnecting. */
const RETRY_MS = 2_000;

export function openSse(res: ServerResponse) {
  // No Connection header of ours: Node's keeps a stream the server ends (MCP's listen) from holding a socket that its
  // client asked to close.
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'x-accel-buffering': 'no',
  });
  // HEAD gets the headers and ends: a body-less response sends nothing on write(), so an open HEAD stream would hang.
  const head = res.req?.method === 'HEAD';
  if (head) res.end();
  else res.write(`retry: ${RETRY_MS}\n\n`);
  let closed = head;
  /** Bytes handed to the response so far; minus what is still pending, it is what the reader has taken. */
  let written = 0;
  let takenAtLastBeat = -1;
  const closers: Array<() => void> = [];
  const timer = head ? undefined : setInterval(beat, HEARTBEAT_MS);
  timer?.unref();

  /** A reader that took no byte during a whole interval while bytes waited is stalled: dropped below the bound too. */
  function beat(): void {
    if (closed) return;
    const pending = res.writableLength;
    const taken = written - pending;
    if (pending > 0 && taken === takenAtLastBeat) return shutdown('drop');
    takenAtLastBeat = pending > 0 ? taken : -1;
    put(': ping\n\n');
  }

  /**
   * The socket stays corked until the loop's check phase or CORKED_BYTES, so the publishes of one loop turn (a busy
   * server reads many ingest requests per turn) reach the reader in one write: one system call per turn, not per
   * publish (the fan-in's 20 subscribers, docs/bench.md "speed paths kept").
   */
  let corked: Socket | null = null;
  function uncork(): void {
    // The socket corked, not res.socket: do not rely on end() having released this cork before the response let go
    // of its socket (kept open for the connection's next request).
    corked?.uncork();
    corked = null;
  }

  function put(frames: string | Buffer): void {
    written += typeof frames === 'string' ? Buffer.byteLength(frames) : frames.length;
    // A reader already CORKED_BYTES behind gains nothing from a cork: its bytes wait in the buffer either way.
    if (!corked && res.socket && res.writableLength < CORKED_BYTES) {
      corked = res.socket;
      corked.cork();
      setImmediate(uncork);
    }
    res.write(frames);
    if (res.writableLength >= CORKED_BYTES) uncork();
    if (res.writableLength > MAX_PENDING_BYTES) shutdown('drop');
  }

  /** A dropped reader's socket is destroyed: end() would queue behind what it is not taking (it reconnects). */
  function shutdown(then?: 'end' | 'drop'): void {
    if (closed) return;
    closed = true;
    clearInterval(timer);
    for (const fn of closers.splice(0)) fn();
    if (then === 'end') res.end();
    else if (then === 'drop') res.destroy();
  }
  res.on('close', () => shutdown());
  return {
    /** Writes ready-made frames (a replay page, a shared publish buffer), counted against the lag bound. */
    write(frames: string | Buffer): void {
      if (!closed) put(frames);
    },
    close() {
      shutdown('end');
    },
    get closed() {
      return closed;
    },
    onClose(fn: () => void): void {
      if (closed) fn();
      else closers.push(fn);
    },
  };
}
