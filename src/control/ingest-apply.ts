// Writes a validated ingest batch inside the caller's transaction. Publishes nothing: a rolled-back batch or import
// never showed any event to a live stream. Each fact is stored once, as the Control Plane saw it (createEventTruth;
// docs/control-data.md, "One event per fact").
import { createHash, timingSafeEqual } from 'node:crypto';
import { invalidParam } from './params.ts';
import { HttpError } from '../http/http-error.ts';
import type { KeyedRunRow } from '../db/runs-store.ts';
import type { EventsStore, EventInput, EventRow } from '../db/events-store.ts';
import type { ControlDeps } from './deps.ts';
import type { IngestBatch } from './ingest-validate.ts';
import { eventData } from './event-bus.ts';
import { str } from '../untrusted.ts';
import { handedRunKey } from '../engine/ids.ts';
import { runContainerRow } from '../engine/run-event.ts';
import { logWithoutSecrets, redactSecrets } from '../engine/text.ts';
import type { IngestResult } from '../client/types.ts';
import { LIVE, RESUMABLE, TERMINAL, isResume } from '../run-json.ts';

/** What the Control Plane keeps of a run's key: its SHA-256 (docs/control-data.md, "Each run's own runner"). */
export function runKeyDigest(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

function sameDigest(bound: Uint8Array, digest: Buffer): boolean {
  return bound.length === digest.length && timingSafeEqual(bound, digest);
}

/** Whether `key` is the one a run is bound to (`bound`, its digest): one SHA-256, a constant-time comparison. */
export function isBoundKey(bound: Uint8Array, key: string | null): boolean {
  return key !== null && sameDigest(bound, runKeyDigest(key));
}

/**
 * Refuses a batch that writes a run bound to another key, before anything of it is applied (docs/control-data.md,
 * "Each run's own runner", which says why and how keys are made, handed and moved). `stored` is the run as read once
 * for this batch (undefined: none yet). `bind`: the digest to bind when this batch makes the run, or the made key's
 * when a batch carrying it moves a run off the key handed to its worker (a pod's signer); `movedFrom`: then the handed
 * key's digest. A run already stored without a key stays unbound (`bound === null`), since whoever sent a key first
 * would lock its real runner out (an import, resume or verify binds it to its folder's `run-key` instead).
 */
function checkRunKey(
  source: string, run: string, stored: KeyedRunRow | undefined, key: string | null, boundRuns: boolean,
): { bind: Buffer | null; movedFrom: Uint8Array | null } {
  // A `bound-runs` token (a pod's run container's, which its agent can read) creates no run and writes no unbound one:
  // the pod's seal step stored its run, bound to the key handed to it (docs/control-data.md, "Each run's own runner").
  if (boundRuns && (stored === undefined || stored.run_key_sha256 === null)) {
    throw new HttpError('forbidden_run', `Run ${source}/${run} is ${stored ? 'bound to no key' : 'not stored'}: ` +
      'this token writes only runs already stored and bound to the key its batch carries (nothing of the batch was ' +
      'applied)');
  }
  if (stored === undefined) return { bind: key === null ? null : runKeyDigest(key), movedFrom: null };
  const bound = stored.run_key_sha256;
  if (bound === null) return { bind: null, movedFrom: null };
  if (key !== null) {
    // Digested once: compared with the bound one, and bound in its place on a move.
    const digest = runKeyDigest(key);
    if (sameDigest(bound, digest)) return { bind: null, movedFrom: null };
    if (sameDigest(bound, runKeyDigest(handedRunKey(key)))) return { bind: digest, movedFrom: bound };
  }
  const sent = key === null ? 'carries no "run_key" for it' : 'carries another "run_key"';
  throw new HttpError('forbidden_run', `Run ${source}/${run} is bound to the key of the runner that made it; this ` +
    `batch ${sent} (nothing of the batch was applied)`);
}

/**
 * Also each named run's start as stored, for the metrics, which would otherwise read every run again. `fromDisk`: an
 * import of run folders (the operator's action, not a runner's; its caller skips a bound run whose folder holds another
 * key) takes no control request; it binds a run stored without a key to the key its folder holds (a bound run keeps
 * its own), so from then on only the run's own runner writes it. `boundRuns`: the batch came with a `bound-runs`
 * runner token, which may write only runs already stored and bound (checkRunKey).
 */
export function storeBatch(
  deps: ControlDeps, batch: IngestBatch, opts: { fromDisk?: boolean; boundRuns?: boolean } = {},
): { result: IngestResult; inserted: EventRow[]; started: Map<string, number> } {
  const { stores } = deps;
  const { source } = batch;
  const byRunner = opts.fromDisk !== true;
  const boundRuns = opts.boundRuns === true;
  // Every referenced run must exist after this batch: checked before the first write, inside the lock.
  const known = new Set(batch.runs.map((r) => r.run));
  const started = new Map<string, number>();
  // Runs this batch sent a key for that stay unbound (stored first without one): a pod's seal step fails on it.
  const unbound: string[] = [];
  // Runs this batch writes with the key a run moved onto (a pod's signer): told whether a stop was ever asked.
  const ownKey: string[] = [];
  // A pod's runs (a `bound-runs` batch, a run moved onto its signer's key), each with the one line that may end it:
  // the signer's own (the last run.status line of its batch, after its copy of events.jsonl) when that batch's row
  // ends the run so, else null. Their events are the agent's lines (events.jsonl is its to write): no resume or
  // requeue (a pod's run is never resumed), which would move a stopped run back or count another start, and no end
  // but the signer's.
  const podRuns = new Map<string, EventInput | null>();
  for (const item of [...batch.events, ...batch.artifacts]) {
    if (known.has(item.run)) continue;
    const row = stores.runs.getKeyed(source, item.run);
    if (!row) invalidParam(`Run ${source}/${item.run} is unknown; send it in "runs" first`);
    // A key comes only with its run: events or artifacts alone may not write a bound run.
    if (byRunner) checkRunKey(source, item.run, row, null, boundRuns);
    started.set(item.run, row.started_at);
    known.add(item.run);
  }
  const now = deps.clock();
  for (const { run_key: key, lease_until: lease, ...sent } of batch.runs) {
    // One read of the row serves the key check and the times below.
    const stored = stores.runs.getKeyed(source, sent.run);
    // Checked before this run's first write; a refusal rolls back the batch's earlier runs with it.
    const checked = byRunner ? checkRunKey(source, sent.run, stored, key, boundRuns) : null;
    // A pod's run container's row says only what is its own to say (checkRunKey refused one with no stored row).
    const run = boundRuns && stored
      ? runContainerRow(sent, stored, stores.controlRequests.latest(source, sent.run, 'stop') !== undefined)
      : sent;
    const bind = checked ? checked.bind : key === null ? null : runKeyDigest(key);
    if (byRunner && key !== null && stored?.run_key_sha256 === null) unbound.push(run.run);
    // A row stamped later than now (stored before body times were bounded, or by a clock since stepped back) is no
    // newer than this update: no stored claim to the future may keep a runner's real update out (ingest-validate.ts).
    // Nor is a row its handed key stored, once the run moves onto the key that was made from: whatever that worker
    // (whose agent could read the key) claimed, the moving batch's row replaces it (`key_moved`, GET of the run).
    const arriving = Math.min(now, run.updated_at ?? now);
    const moving = (checked?.movedFrom ?? null) !== null;
    if (byRunner && key !== null && (moving || stored?.run_key_moved === 1)) ownKey.push(run.run);
    // The signer's batch, or an import of a moved run (its events.jsonl is the agent's all the same).
    const bySigner = !boundRuns && (moving || stored?.run_key_moved === 1);
    if (boundRuns || bySigner) podRuns.set(run.run, bySigner ? signerEnd(batch.events, run.run, run.status) : null);
    // A stopped run is terminal: a runner that never saw the stop (its launch went on regardless, a pod's runner that
    // came late) does not move it back to queued, running or blocked; a resume, whose runner saw it, does; and so does
    // the move onto the signer's key, whose row replaces a stop the handed key claimed, never one the Control Plane
    // was asked for (the signer takes that stop; should it die first, the run stays stopped, not queued for ever).
    // A pod's run container's own failed end is as final to its later rows (only its signer's row replaces it).
    const claimedStop = moving && stores.controlRequests.latest(source, run.run, 'stop') === undefined;
    const over = stored?.status === 'stopped' || (boundRuns && stored?.status === 'failed');
    const late = !claimedStop && over && LIVE.has(run.status)
      && (podRuns.has(run.run) || !resumedIn(batch.events, run.run));
    if (!late) {
      if (stored && (stored.updated_at > now || moving)) stores.runs.patch(source, run.run, { updated_at: arriving });
      stores.runs.upsert(source, run);
    }
    if (bind !== null) stores.runs.bindKey(source, run.run, bind, checked?.movedFrom ?? null);
    // The run's own runner (its key checked above) says by when it ends the run, once; never its agent's token.
    if (lease !== null && !boundRuns) stores.runs.setLease(source, run.run, lease);
    started.set(run.run, stored?.started_at ?? run.started_at);
  }
  const inserted: EventRow[] = [];
  const truth = createEventTruth(stores.events, podRuns);
  for (const shipped of batch.events) {
    const row = truth.insert(shipped);
    if (row) inserted.push(row);
  }
  for (const a of batch.artifacts) {
    const { path, content_type, content } = a;
    // A log as the worker saves it (run-context.ts), whatever the sender did to it: a pod's agent writes its own.
    const kept = path.endsWith('.log') ? logWithoutSecrets(content) : content;
    stores.artifacts.put(source, a.run, { path, content_type, content: kept, created_at: now });
  }
  const result: IngestResult = {
    runs: batch.runs.length,
    events: inserted.length,
    duplicates: batch.events.length - inserted.length,
    artifacts: batch.artifacts.length,
    control: [],
  };
  if (unbound.length > 0) result.unbound = unbound;
  // A reply's error as a run's log keeps it, and each URL in it to scheme and host: a chat reply URL's path is its
  // credential.
  const notifications = batch.notifications
    .map((n) => (n.error === null ? n : { ...n, error: redactSecrets(n.error, 'host') }));
  if (notifications.length > 0) result.notifications = stores.notifications.ingest(source, notifications);
  if (batch.served_repos !== null) {
    stores.servedRepos.replace(source, batch.served_repos, now);
    result.served_repos = batch.served_repos.length;
  }
  if (byRunner) {
    // Each run's requests go to its own worker (the key checked above), which ships it at least every 2 s: no runner
    // relays for another, and none takes another run's answer or stop.
    const pending = stores.controlRequests.takePending(source, batch.runs.map((r) => r.run), now);
    result.control = pending.map((r) => ({ ...r.payload, id: r.id, run: r.run, action: r.action }));
    // A stop the run container's worker took (it stopped before its checks, leaving no evidence) is delivered: only
    // this says to the signer that a stop was asked, and was not the agent's claim.
    const stopAsked = ownKey.filter((run) => stores.controlRequests.latest(source, run, 'stop') !== undefined);
    if (stopAsked.length > 0) result.stop_asked = stopAsked;
    // And the highest seq stored for each: its events go after it, or those the handed key stored first (a seq the
    // agent shipped past its events.jsonl, or one the signer could not copy) would keep the signer's out.
    if (ownKey.length > 0) result.last_seq = ownKey.map((run) => ({ run, seq: stores.events.maxSeq(source, run) }));
  }
  return { result, inserted, started };
}

/**
 * Whether a runner's transition (its own `from`, to `to`) comes too late for the stored status `before`: one made
 * before a stop reached it, after the Control Plane's `stopping` or `stopped`. A resume starts from the stop it saw;
 * a pod's run (`resumable` false) has none.
 */
function lateForStop(before: string, from: unknown, to: string, resumable: boolean): boolean {
  if (!LIVE.has(to)) return false;
  // Nothing moves a pod's run on from its end: no resume follows it.
  if (!resumable) return before === 'stopping' || TERMINAL.has(before);
  return before === 'stopping' || (before === 'stopped' && !RESUMABLE.has(str(from) ?? ''));
}

/** The signer's own end of `run`: its batch's last run.status line, when that goes to the batch row's `status`. */
function signerEnd(events: readonly EventInput[], run: string, status: string): EventInput | null {
  if (!TERMINAL.has(status)) return null;
  const last = events.findLast((ev) => ev.run === run && ev.kind === 'run.status');
  return last !== undefined && str(eventData(last.data).to) === status ? last : null;
}

/** Whether a batch resumes `run`: it carries the run's own move out of a stop or failure. */
function resumedIn(events: readonly EventInput[], run: string): boolean {
  return events.some((ev) => ev.run === run && ev.kind === 'run.status' && isResume(eventData(ev.data)));
}


type Exchange = { kind: string; data: Record<string, unknown> } | null;

/** `podRuns`: runs no event of this batch resumes, each with the only line that may end it (storeBatch). */
function createEventTruth(
  events: EventsStore, podRuns: ReadonlyMap<string, EventInput | null>,
): { insert(ev: EventInput): EventRow | null } {
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
      const pod = podRuns.has(ev.run);
      // One end at most: the signer's line, stored only while none is.
      const end = pod && TERMINAL.has(to ?? '');
      if (end && (ev !== podRuns.get(ev.run) || TERMINAL.has(before ?? ''))) return null;
      if (to === null || before === null) return ev;
      // Nor is a pod's run queued again once it moved (only a resume requeues a run).
      if (to === before || (pod && to === 'queued') || lateForStop(before, data.from, to, !pod)) return null;
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
        return id === null ? null : eventRow(id, shipped);
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
      return eventRow(id, ev);
    },
  };
}

/**
 * The stored row, its fields named one by one: `{ id, ...ev }` (a spread after a field) took 0.4 µs an event against
 * 0.03, on every event of every batch (docs/bench-history.md, the fan-in).
 */
function eventRow(id: number, ev: EventInput): EventRow {
  return { id, source: ev.source, run: ev.run, seq: ev.seq, ts: ev.ts, kind: ev.kind, data: ev.data };
}
