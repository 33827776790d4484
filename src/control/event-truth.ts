// Keeps a run's event history telling each fact once, as the Control Plane saw it:
// - a `run.status` event's `from` is the status recorded before it. A runner that never saw the Control
//   Plane's `stopping` ships `running→stopped`; stored after `running→stopping`, it reads `stopping→stopped`.
//   A transition already recorded (the Control Plane wrote `stopping→stopped` for a worker that died) is not
//   stored twice. While the Control Plane holds a run as `stopping`, the runner's transitions to a live status
//   (queued, running, blocked) happened before the stop reached it and arrive late: the runs table already
//   ignores them (an older `updated_at` never overwrites a newer one), and the history does too.
// - an `answer` the Control Plane recorded when it took the answer is not stored again when the runner ships its
//   own event for using it: the first answer event after a question is the one that counts.
// Runs inside the ingest transaction, before each insert; reads the run's newest events through the store.
import type { EventsStore, EventInput } from '../db/events-store.ts';
import { obj, str } from '../untrusted.ts';

const LIVE: ReadonlySet<string> = new Set(['queued', 'running', 'blocked']);

export type Verdict = { keep: true; event: EventInput } | { keep: false };

function dataOf(text: string): Record<string, unknown> {
  try {
    return obj(JSON.parse(text));
  } catch {
    return {};
  }
}

export interface EventTruth {
  /** The event to store (maybe with a corrected `from`), or keep:false when it repeats a recorded fact. */
  check(ev: EventInput): Verdict;
  /** Tells the checker whether the insert stored the event (a duplicate seq stores nothing). */
  stored(ev: EventInput, inserted: boolean): void;
}

export function createEventTruth(events: EventsStore): EventTruth {
  // Per run, the status / exchange as of the events checked so far in this batch (undefined: ask the store).
  const status = new Map<string, string | null>();
  const exchange = new Map<string, { kind: string; data: Record<string, unknown> } | null>();

  function lastStatus(ev: EventInput): string | null {
    const key = `${ev.source}\n${ev.run}`;
    if (!status.has(key)) {
      const row = events.latest(ev.source, ev.run, 'run.status');
      status.set(key, row ? str(dataOf(row.data).to) : null);
    }
    return status.get(key) ?? null;
  }

  function lastExchange(ev: EventInput): { kind: string; data: Record<string, unknown> } | null {
    const key = `${ev.source}\n${ev.run}`;
    if (!exchange.has(key)) {
      const question = events.latest(ev.source, ev.run, 'question');
      const answer = events.latest(ev.source, ev.run, 'answer');
      const row = question && answer ? (question.id > answer.id ? question : answer) : (question ?? answer);
      exchange.set(key, row ? { kind: row.kind, data: dataOf(row.data) } : null);
    }
    return exchange.get(key) ?? null;
  }

  return {
    check(ev) {
      if (ev.kind === 'run.status') {
        const data = dataOf(ev.data);
        const to = str(data.to);
        const before = lastStatus(ev);
        if (to === null || before === null) return { keep: true, event: ev };
        if (to === before || (before === 'stopping' && LIVE.has(to))) return { keep: false };
        if (data.from === before) return { keep: true, event: ev };
        return { keep: true, event: { ...ev, data: JSON.stringify({ ...data, from: before }) } };
      }
      if (ev.kind === 'answer') {
        const last = lastExchange(ev);
        const data = dataOf(ev.data);
        const fromControl = last?.kind === 'answer' && last.data.via === 'control';
        if (fromControl && data.via === undefined && last.data.answer === data.answer) return { keep: false };
      }
      return { keep: true, event: ev };
    },
    stored(ev, inserted) {
      // Most events (logs) change nothing here: no key is built for them on the ingest hot path.
      const tracked = ev.kind === 'run.status' || ev.kind === 'question' || ev.kind === 'answer';
      if (inserted && !tracked) return;
      const key = `${ev.source}\n${ev.run}`;
      // A duplicate seq changed nothing: forget what this batch assumed and read the store again next time.
      if (!inserted) {
        status.delete(key);
        exchange.delete(key);
      } else if (ev.kind === 'run.status') {
        status.set(key, str(dataOf(ev.data).to));
      } else {
        exchange.set(key, { kind: ev.kind, data: dataOf(ev.data) });
      }
    },
  };
}
