// Turns a flood of refused requests into a bounded number of audit rows: the first of each kind in a window is
// written at once, repeats are only counted and written as one row when the window ends (docs/control-config.md).
import type { AuditInput, AuditStore } from '../db/audit-store.ts';
import type { Logger } from '../log.ts';
import { errorMessage } from '../errors.ts';
import { iso } from '../iso-time.ts';

/** How long repeats of one refusal are counted before their row is written. */
const WINDOW_MS = 60_000;
/** Distinct refusals tracked in one window; past this, repeats of a new key are counted under peer `*`. */
const MAX_KEYS = 1_000;

interface Tally {
  input: AuditInput;
  startedAt: number;
  repeats: number;
  firstRepeatAt: number;
  lastRepeatAt: number;
}

export type RefusalTally = ReturnType<typeof createRefusalTally>;

export function createRefusalTally(audit: AuditStore, clock: () => number, log: Logger) {
  const open = new Map<string, Tally>();
  const timer = setInterval(() => {
    try {
      flush(false);
    } catch (err) {
      // A failed write (disk full, locked) loses those counts; it must not take the server down from a timer.
      log.error('refusal audit flush failed', { error: errorMessage(err) });
    }
  }, WINDOW_MS);
  timer.unref();

  function keyOf(input: AuditInput): string {
    return JSON.stringify([input.actor, input.peer, input.action, input.target, input.outcome]);
  }

  function writeRepeats(t: Tally): void {
    if (t.repeats === 0) return;
    // The first refusal's request id names that one request, not the repeats.
    const { request_id: _first, ...detail } = t.input.detail ?? {};
    audit.append({
      ...t.input,
      detail: {
        ...detail,
        count: t.repeats,
        repeated: true,
        first_at: iso(t.firstRepeatAt),
        last_at: iso(t.lastRepeatAt),
        window_ms: WINDOW_MS,
      },
    });
  }

  function flush(all = false): void {
    const now = clock();
    for (const [key, t] of open) {
      if (!all && now - t.startedAt < WINDOW_MS) continue;
      open.delete(key);
      writeRepeats(t);
    }
  }

  function record(input: AuditInput): void {
    const now = clock();
    let key = keyOf(input);
    let t = open.get(key);
    if (t && now - t.startedAt >= WINDOW_MS) {
      open.delete(key);
      writeRepeats(t);
      t = undefined;
    }
    if (!t && open.size >= MAX_KEYS) {
      const pooled = { ...input, peer: '*', target: null };
      key = keyOf(pooled);
      t = open.get(key);
      if (!t) {
        // The pool's first refusal is only counted: a new key per request must not mean a row per request.
        t = { input: pooled, startedAt: now, repeats: 0, firstRepeatAt: now, lastRepeatAt: now };
        open.set(key, t);
      }
    }
    if (t) {
      if (t.repeats === 0) t.firstRepeatAt = now;
      t.repeats++;
      t.lastRepeatAt = now;
      return;
    }
    audit.append({ ...input, detail: { ...input.detail, count: 1 } });
    open.set(key, { input, startedAt: now, repeats: 0, firstRepeatAt: now, lastRepeatAt: now });
  }

  return {
    record,
    flush,
    close() {
      clearInterval(timer);
      flush(true);
    },
  };
}
