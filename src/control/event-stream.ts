// One SSE stream of events: replay from the DB after a given id, then live from the bus — no gap, no duplicate.
//
// Why no gap: the bus only ever carries rows that are already committed, and a commit plus its publish happen in one
// synchronous turn of this thread. So the stream subscribes first, replays the DB in pages (yielding to the socket
// between pages), then makes one last synchronous pass up to the current end of the table and flips to live in the
// same turn: everything published before the flip was committed before it and is in that pass; everything after
// arrives live. Ids only grow, so `id <= lastSent` filters any overlap (no duplicate).
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

  function write(ev: EncodedEvent): void {
    if (sse.closed || ev.id <= lastSent) return;
    lastSent = ev.id;
    res.write(ev.frame);
    if (res.writableLength > MAX_PENDING_BYTES) sse.close();
  }

  const unsubscribe = deps.bus.subscribe({
    ...scope,
    deliver(ev) {
      if (live) write(ev);
    },
    end() {
      sse.close();
    },
  });
  sse.onClose(unsubscribe);

  function replayPage(): number {
    const rows = deps.stores.events.listAll({ after: lastSent, limit: PAGE, ...scope });
    for (const row of rows) write(encodeEvent(row));
    return rows.length;
  }

  // Paged replay that lets the socket drain: a long history never sits in memory at once.
  while (!sse.closed && replayPage() === PAGE) {
    if (res.writableNeedDrain) await waitForDrain(res);
  }
  if (sse.closed) return;
  // Final catch-up and the switch to live in one synchronous turn (see the header comment).
  while (replayPage() === PAGE && !sse.closed);
  live = true;
}
