// In-process fan-out of newly stored events to live subscribers (SSE streams). It never reads or writes the DB:
// callers publish rows right after their transaction commits, and each event is serialized once for every subscriber.
import { HttpError } from '../http/http-error.ts';
import type { EventRow } from '../db/events-store.ts';
import { iso } from '../iso-time.ts';
import { obj, tryParseJson } from '../untrusted.ts';

/** One publish's events a subscriber sees, ascending by id, their frames encoded once per publish (docs/bench.md). */
export interface EncodedBatch {
  events: EncodedEvent[];
  bytes: Buffer;
}

interface Subscriber {
  source?: string;
  run?: string;
  deliver(batch: EncodedBatch): void;
  /** Called once when the bus closes (server shutdown). */
  end(): void;
}

/** Bounds on live subscribers (docs/control-data.md): every subscriber holds a socket and up to its lag bound. */
interface SubscriberLimits {
  total: number;
  perRun: number;
}

export type RunEventBus = ReturnType<typeof createRunEventBus>;
export type EncodedEvent = ReturnType<typeof encodeEvent>;

/** A stored event's data as an object ({} when it is not one). */
export function eventData(text: string): Record<string, unknown> {
  return obj(tryParseJson(text));
}

/** Event JSON built by concatenation: `data` is already JSON text, so it is embedded, never re-parsed. */
export function eventJson(row: EventRow): string {
  return (
    `{"id":${row.id},"source":${JSON.stringify(row.source)},"run":${JSON.stringify(row.run)},"seq":${row.seq},` +
    `"ts":"${iso(row.ts)}","kind":${JSON.stringify(row.kind)},"data":${row.data}}`
  );
}

/** One event, encoded once as its complete SSE frame. */
export function encodeEvent(row: EventRow) {
  // Kinds are validated on ingest; stripping CR/LF keeps a frame a frame even if one slipped through.
  const frame = `id: ${row.id}\nevent: ${row.kind.replace(/[\r\n]/g, '')}\ndata: ${eventJson(row)}\n\n`;
  return { id: row.id, source: row.source, run: row.run, frame };
}

/** A subscriber's scope: '' for every event, the source, or `source/run` (segments hold no `/`). */
function scopeOf(source: string | undefined, run: string | undefined): string {
  if (source === undefined) return '';
  return run === undefined ? source : `${source}/${run}`;
}

export function createRunEventBus(limits: SubscriberLimits) {
  let count = 0;
  const scopes = new Map<string, Set<Subscriber>>();
  let closed = false;

  function deliverAll(set: Set<Subscriber>, events: EncodedEvent[]): void {
    const text = events.length === 1 ? events[0]!.frame : events.map((e) => e.frame).join('');
    const batch: EncodedBatch = { events, bytes: Buffer.from(text) };
    for (const sub of set) {
      try {
        sub.deliver(batch);
      } catch {
        // One broken subscriber must not starve the others; its own close handler removes it.
      }
    }
  }

  return {
    publish(rows: readonly EventRow[]): void {
      if (closed || rows.length === 0 || scopes.size === 0) return;
      // Grouped by scope, only for scopes somebody listens to: found again only when the run changes (a batch's
      // events are most often one run's), and an event no scope listens to is never encoded.
      const groups = new Map<string, EncodedEvent[]>();
      let listened: string[] = [];
      let last: EventRow | undefined;
      for (const row of rows) {
        if (last === undefined || row.run !== last.run || row.source !== last.source) {
          listened = ['', row.source, scopeOf(row.source, row.run)].filter((scope) => scopes.has(scope));
        }
        last = row;
        if (listened.length === 0) continue;
        const ev = encodeEvent(row);
        for (const scope of listened) {
          let list = groups.get(scope);
          if (!list) groups.set(scope, (list = []));
          list.push(ev);
        }
      }
      for (const [scope, list] of groups) deliverAll(scopes.get(scope)!, list);
    },
    /** Answers the unsubscribe function; past a limit, 429 before the stream's 200 goes out. */
    subscribe(sub: Subscriber): () => void {
      if (closed) {
        sub.end();
        return () => {};
      }
      const scope = scopeOf(sub.source, sub.run);
      const full = (message: string) => new HttpError('too_many_requests', message, { 'retry-after': '30' });
      if (count >= limits.total) throw full(`The server already serves ${limits.total} event streams`);
      let set = scopes.get(scope);
      if (sub.source !== undefined && sub.run !== undefined && (set?.size ?? 0) >= limits.perRun) {
        throw full(`Run ${scope} already has ${limits.perRun} event streams`);
      }
      if (!set) scopes.set(scope, (set = new Set()));
      set.add(sub);
      count++;
      const owner = set;
      let subscribed = true;
      return () => {
        if (!subscribed) return;
        subscribed = false;
        // After close() the sets and the count are already cleared.
        if (closed) return;
        owner.delete(sub);
        count--;
        if (owner.size === 0 && scopes.get(scope) === owner) scopes.delete(scope);
      };
    },
    size() {
      return count;
    },
    /** Ends every subscriber; later subscribe calls end at once. */
    close() {
      if (closed) return;
      closed = true;
      const subs = [...scopes.values()].flatMap((s) => [...s]);
      scopes.clear();
      count = 0;
      for (const sub of subs) {
        try {
          sub.end();
        } catch {
          // Shutting down: keep ending the rest.
        }
      }
    },
  };
}
