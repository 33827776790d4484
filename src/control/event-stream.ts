// One SSE stream of events: replay from the DB after a given id, then live from the bus — no gap, no duplicate.
//
// Why no gap: the bus only ever carries rows that are already committed, and a commit plus its publish happen in one
// synchronous turn of this thread. So the stream subscribes first, replays the DB in pages (yielding to the socket
// between full pages), and flips to live in the same turn as the last, short page: everything published before the
// flip was committed before that read and is in it; everything after arrives live. Events delivered while replaying
// are dropped on purpose because the next page re-reads them. Ids only grow, so `id <= lastSent` rules out duplicates.
import type { ServerResponse } from 'node:http';
import { openSse } from '../http/sse.ts';
import type { ControlDeps } from './deps.ts';
import { encodeEvent, type EncodedEvent } from './event-bus.ts';

const PAGE = 500;
/** A subscriber this far behind is cut off; it reconnects with Last-Event-ID and catches up from the DB. */
const MAX_PENDING_BYTES = 4 * 1024 * 1024;

export interface StreamScope {
  source?: string;
  run?: string;
}

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

export async function streamEvents(deps: ControlDeps, res: ServerResponse, scope: StreamScope, after: number): Promise<void> {
  const sse = openSse(res);
  let lastSent = after;
  let live = false;

  function send(text: string | Buffer): void {
    res.write(text);
    if (res.writableLength > MAX_PENDING_BYTES) sse.close();
  }

  function write(ev: EncodedEvent): void {
    if (sse.closed || ev.id <= lastSent) return;
    lastSent = ev.id;
    send(ev.frame);
  }

  const unsubscribe = deps.bus.subscribe({
    ...scope,
    deliver(batch) {
      if (!live || sse.closed) return;
      // Ids only grow, so a batch that starts past lastSent goes out as one shared buffer in one write.
      if (batch.events[0]!.id > lastSent) {
        lastSent = batch.events[batch.events.length - 1]!.id;
        send(batch.bytes);
      } else {
        for (const ev of batch.events) write(ev);
      }
    },
    end() {
      sse.close();
    },
  });
  sse.onClose(unsubscribe);

  function replayPage(): number {
    const rows = deps.stores.events.listAll({ after: lastSent, limit: PAGE, ...scope });
    let text = '';
    for (const row of rows) text += encodeEvent(row).frame;
    if (rows.length > 0 && !sse.closed) {
      lastSent = rows[rows.length - 1]!.id;
      send(text);
    }
    return rows.length;
  }

  // Paged replay that lets the socket drain: a long history never sits in memory at once. The await only follows a
  // full page, so the short page that ends the loop and `live = true` run in one turn (see the header comment).
  while (!sse.closed && replayPage() === PAGE) {
    if (res.writableNeedDrain) await waitForDrain(res);
  }
  live = true;
}
