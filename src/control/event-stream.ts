// One SSE stream of events: replay from the DB after a given id, then live from the bus — no gap, no duplicate.
// A commit and its publish happen in one synchronous turn, so the stream subscribes first, replays in pages and
// flips to live in the same turn as the last, short page; events delivered while replaying are dropped because the
// next page re-reads them (docs/control-data.md).
import type { ServerResponse } from 'node:http';
import { openSse } from '../http/sse.ts';
import type { ControlDeps } from './deps.ts';
import { encodeEvent, type EncodedEvent } from './event-bus.ts';

const PAGE = 500;
/**
 * A replay page also ends once its frames pass this many bytes: 500 large events are tens of MB, and one page is
 * written before the socket can push back, so rows alone would not bound what a reader that never reads costs.
 */
const PAGE_BYTES = 256 * 1024;

function waitForDrain(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

export async function streamEvents(
  deps: ControlDeps, res: ServerResponse, scope: { source?: string; run?: string }, after: number,
): Promise<void> {
  let lastSent = after;
  let live = false;
  let ended = false;
  let opened = false;

  function write(ev: EncodedEvent): void {
    if (sse.closed || ev.id <= lastSent) return;
    lastSent = ev.id;
    sse.write(ev.frame);
  }

  // Nothing is delivered before `live`, so subscribing first and opening the stream right after loses nothing.
  const unsubscribe = deps.bus.subscribe({
    ...scope,
    deliver(batch) {
      if (!live || sse.closed) return;
      // Ids only grow, so a batch that starts past lastSent goes out as one shared buffer in one write.
      if (batch.events[0]!.id > lastSent) {
        lastSent = batch.events[batch.events.length - 1]!.id;
        sse.write(batch.bytes);
      } else {
        for (const ev of batch.events) write(ev);
      }
    },
    end() {
      // The bus ends a subscriber at shutdown, or at once when it is already closed (before the stream is open).
      ended = true;
      if (opened) sse.close();
    },
  });
  const sse = openSse(res);
  opened = true;
  sse.onClose(unsubscribe);
  if (ended) sse.close();

  /** Writes the next page; true when it was full (by rows or by bytes), so more may follow. */
  function replayPage(): boolean {
    const rows = deps.stores.events.listAll({ after: lastSent, limit: PAGE, ...scope });
    let text = '';
    let taken = 0;
    for (const row of rows) {
      text += encodeEvent(row).frame;
      taken++;
      if (text.length >= PAGE_BYTES) break;
    }
    if (taken > 0 && !sse.closed) {
      lastSent = rows[taken - 1]!.id;
      sse.write(text);
    }
    return rows.length === PAGE || taken < rows.length;
  }

  // Paged replay that lets the socket drain: a long history never sits in memory at once. The await only follows a
  // full page, so the short page that ends the loop and `live = true` run in one turn (see the header comment).
  while (!sse.closed && replayPage()) {
    if (res.writableNeedDrain) await waitForDrain(res);
  }
  live = true;
}
