// Frees a response body made for one request only as soon as the response is written, instead of whenever V8 next
// collects it. An uncached runs page is ~28 KB that node:sqlite copied into an ArrayBuffer of its own: memory outside
// V8's heap that V8 counts against a limit which, once reached, starts a full mark-compact. Under a stream of
// uncached pages that was ~100 mark-compacts per 3 s and ~8 µs of GC per request (docs/bench.md, "GC and the list").
//
// Only after 'finish': the data has then been handed to the kernel, so nothing reads the memory any more. Only a
// buffer the body covers whole: a view into a pool or a larger buffer is never touched.
import type { ServerResponse } from 'node:http';

export function releaseWhenSent(res: ServerResponse, body: Uint8Array): void {
  const buffer = body.buffer;
  if (!(buffer instanceof ArrayBuffer) || body.byteOffset !== 0 || body.byteLength !== buffer.byteLength) return;
  // transfer(0) detaches the buffer: its backing store is freed now, and V8's count of outside memory drops with it.
  res.once('finish', () => {
    try {
      buffer.transfer(0);
    } catch {
      // Already detached or not detachable: then there is nothing of ours to free.
    }
  });
}
