// Keeps a run's event history telling each fact once, as the Control Plane saw it (docs/control-data.md, "One event
// per fact"). Runs inside the ingest transaction.
import type { EventsStore, EventInput, EventRow } from '../db/events-store.ts';
import { obj, str, tryParseJson } from '../untrusted.ts';

const LIVE: ReadonlySet<string> = new Set(['queued', 'running', 'blocked']);

type Exchange = { kind: string; data: Record<string, unknown> } | null;

export function eventData(text: string): Record<string, unknown> {
  return obj(tryParseJson(text));
}

export function createEventTruth(events: EventsStore): { insert(ev: EventInput): EventRow | null } {
  // Per run, the status / exchange as of the events stored so far in this batch (undefined: ask the store).
  const status = new Map<string, string | null>();
  const exchange = new Map<string, Exchange>();

  function lastStatus(ev: EventInput, key: string): string | null {
    if (!status.has(key)) {
      const row = events.latest(ev.source, ev.run, 'run.status');
      status.set(key, row ? str(eventData(row.data).to) : null);
    }
    return status.get(key) ?? null;
  }

  function lastExchange(ev: EventInput, key: string): Exchange {
    if (!exchange.has(key)) {
      const question = events.latest(ev.source, ev.run, 'question');
      const answer = events.latest(ev.source, ev.run, 'answer');
      const row = question && answer ? (question.id > answer.id ? question : answer) : (question ?? answer);
      exchange.set(key, row ? { kind: row.kind, data: eventData(row.data) } : null);
    }
    return exchange.get(key) ?? null;
  }

  function corrected(ev: EventInput, key: string): EventInput | null {
    if (ev.kind === 'run.status') {
      const data = eventData(ev.data);
      const to = str(data.to);
      const before = lastStatus(ev, key);
      if (to === null || before === null) return ev;
      if (to === before || (before === 'stopping' && LIVE.has(to))) return null;
      return data.from === before ? ev : { ...ev, data: JSON.stringify({ ...data, from: before }) };
    }
    if (ev.kind === 'answer') {
      const last = lastExchange(ev, key);
      const data = eventData(ev.data);
      const fromControl = last?.kind === 'answer' && last.data.via === 'control';
      if (fromControl && data.via === undefined && last.data.answer === data.answer) return null;
    }
    return ev;
  }

  return {
    /** Null when it repeats a recorded fact or its seq is already stored. */
    insert(shipped) {
      // Most events (logs) change nothing here: no key is built for them on the ingest hot path.
      const tracked = shipped.kind === 'run.status' || shipped.kind === 'question' || shipped.kind === 'answer';
      if (!tracked) {
        const id = events.insert(shipped);
        return id === null ? null : { id, ...shipped };
      }
      const key = `${shipped.source}\n${shipped.run}`;
      const ev = corrected(shipped, key);
      if (!ev) return null;
      const id = events.insert(ev);
      if (id === null) {
        // A duplicate seq changed nothing: forget what this batch assumed and read the store again next time.
        status.delete(key);
        exchange.delete(key);
        return null;
      }
      if (ev.kind === 'run.status') status.set(key, str(eventData(ev.data).to));
      else exchange.set(key, { kind: ev.kind, data: eventData(ev.data) });
      return { id, ...ev };
    },
  };
}
