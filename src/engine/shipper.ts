// Sends a run folder to the Control Plane (POST /v1/ingest) a batch at a time (run-batch.ts), resumable from ship.json,
// and the worker's live loop that ships a run as it changes (docs/engine.md "Shipping to the Control Plane"). A run its
// loop could not ship is left to the recovery (ship-recovery.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import { createControlClient, ControlApiError } from '../client/client.ts';
import type { IngestBatch, IngestResult } from '../client/types.ts';
import {
  controlFailed, controlToken, discoverControlUrl, homeTokenGoes, isSameMachine, sayWithheld,
} from './control-url.ts';
import { writeJsonAtomic } from './safe-fs.ts';
import { errorMessage } from '../errors.ts';
import { signsLater, toRunJson, type RunState } from './run-state.ts';
import { contentTypeOf, OCTET_STREAM } from '../http/static-files.ts';
import { openRunFolder, pathIn, skipReason, withDir } from './plain-tree.ts';
import { isJsonObject, type Obj } from '../json-value.ts';
import { list, obj, tryParseJson } from '../untrusted.ts';
import {
  eventRefusal, isArtifactPath, isSignerKind, MAX_TEXT, runRefusal, SIGNER_ARTIFACTS, signerFields,
  withoutSignerFields,
} from './run-event.ts';
import { readRunBatch, readRunKey, type SkipReport } from './run-batch.ts';
import { redactSecrets } from './text.ts';
import { clearPending, markPending } from './ship-pending.ts';

/** Said once (SkipReport) for the lines a batch leaves out because ingest would refuse them. */
const REFUSED_LINES = 'events.jsonl lines ingest refuses';

export type ControlItem = IngestResult['control'][number];

type Shipper = ReturnType<typeof createShipper>;

/** Why a flush failed, and whether every other run would fail the same way now rather than this run alone (its
 * batch refused: 403 forbidden_run, 400 invalid_param or bad_request, 413; its folder unreadable or unwritable). */
export interface ShipFailure {
  why: string;
  everyRun: boolean;
}

/** What the send threw that is no ControlApiError (an aborted send, say): every run's. A body cut off or a 200 that is
 * not JSON is a ControlApiError `bad_response` from the client, counted as every run's by failsEveryRun's last line. */
class SendError extends Error {}

/** Anything but a refusal of this run's own batch, or its folder's own error: nothing answered, 401, a 403 about the
 * host, origin, proxy or source, 404/405 (a URL that is the dashboard's or the trigger's), 408, 429, 5xx. */
function failsEveryRun(err: unknown): boolean {
  if (err instanceof SendError) return true;
  if (!(err instanceof ControlApiError)) return false;
  if (err.status === 403) return err.code !== 'forbidden_run';
  if (err.status === 400) return err.code !== 'invalid_param' && err.code !== 'bad_request';
  return err.status !== 413;
}

/** What stopped a flush: what the Control Plane did (control-url.ts controlFailed), else the send's own error. */
function flushFailure(err: unknown, found: { url: string; via: string }, hasToken: boolean): string {
  if (!(err instanceof ControlApiError)) return `shipping to ${found.url} failed (${errorMessage(err)})`;
  return controlFailed(err, found, hasToken);
}

/**
 * A line of events.jsonl as its run's batch carries it, or nothing: a blank line, or one ingest would refuse (not JSON,
 * or refused by eventRefusal), is left out, the first such said once, rather than get the whole batch refused (and
 * every later one: a pod's signer ships the lines the run container's side wrote, its receipt and status after them).
 */
function shippableEvent(line: string, state: RunState, now: number, skip: SkipReport): Obj[] {
  if (line.trim() === '') return [];
  const parsed = tryParseJson(line);
  const event = isJsonObject(parsed) ? { ...parsed, run: state.run } : null;
  const why = event === null ? 'not a JSON object' : eventRefusal(event, state.source, now);
  if (event !== null && why === null) return [event];
  skip(REFUSED_LINES, `(left out; the first: ${why})`);
  return [];
}

/**
 * The run's row as its batch carries it: a field ingest would refuse (runRefusal) is cut to the length ingest takes
 * where that is all it needs, else left out, each said once, rather than get every batch of the run refused (a pod's
 * signer ships the state.json the agent could write, its receipt and status in the same batches). Each field is
 * checked beside those every row needs (the run, its status and start), which the engine writes and none leaves out.
 */
function shippableRun(row: Obj, source: string, now: number, skip: SkipReport): Obj {
  if (runRefusal(row, source, now) === null) return row;
  const base = { run: row.run, status: row.status, started_at: row.started_at };
  if (runRefusal(base, source, now) !== null) return row;
  const out: Obj = { ...base };
  for (const [field, value] of Object.entries(row)) {
    if (field in base) continue;
    const why = runRefusal({ ...base, [field]: value }, source, now);
    if (why === null) {
      out[field] = value;
      continue;
    }
    const cut = typeof value === 'string' ? cutText(value) : null;
    const fits = cut !== null && runRefusal({ ...base, [field]: cut }, source, now) === null;
    out[field] = fits ? cut : null;
    skip(`state.json field ${field}`, `as written (ingest refuses it: ${why}; ${fits ? 'cut short' : 'left out'})`);
  }
  return out;
}

/**
 * `text` cut to the MAX_TEXT UTF-16 code units ingest takes (it counts a string's length), ending in `…`, never
 * between the two halves of a surrogate pair (a lone half is no character: shown as U+FFFD, or refused by JSON tools).
 */
function cutText(text: string): string {
  const end = MAX_TEXT - 1;
  const last = text.charCodeAt(end - 1);
  return `${text.slice(0, last >= 0xd800 && last <= 0xdbff ? end - 1 : end)}…`;
}

/**
 * A pod's run container's batch without what only its signer says of the run (run-event.ts signerFields,
 * isSignerKind, SIGNER_ARTIFACTS), each left out said once: ingest refuses the whole batch for any of it, and the
 * agent can write the run folder (a line, an artifact, a state.json between two of svc's writes).
 */
function withoutSignerWord(batch: IngestBatch, skip: SkipReport): IngestBatch {
  const runs = (batch.runs ?? []).map((row) => {
    const said = signerFields(row);
    if (said.length > 0) skip('state.json fields only the signer sets', `(left out: ${said.join(', ')})`);
    return withoutSignerFields(row);
  });
  const events = (batch.events ?? []).filter((ev) => !isSignerKind(ev.kind));
  if (events.length < (batch.events ?? []).length) skip('events.jsonl lines only the signer writes', '(left out)');
  const artifacts = (batch.artifacts ?? []).filter((a) => !SIGNER_ARTIFACTS.has(a.path));
  if (artifacts.length < (batch.artifacts ?? []).length) skip('artifacts only the signer writes', '(left out)');
  return { ...batch, runs, events, artifacts };
}

/** An artifact as its run's batch carries it, or nothing: one whose name ingest refuses is left out (said once), as
 * a bad event line is, rather than get every batch refused (an agent names the files it leaves). */
function shippableArtifact(
  rel: string, content: Buffer, state: RunState, skip: SkipReport,
): NonNullable<IngestBatch['artifacts']> {
  if (!isArtifactPath(rel)) {
    skip(`artifacts/${redactSecrets(rel)}`,
      'left out: ingest takes only a name relative with no "..", NUL, backslash or credential');
    return [];
  }
  const type = contentTypeOf(rel) ?? OCTET_STREAM;
  return [{ run: state.run, path: rel, content_type: type, content_base64: content.toString('base64') }];
}

/** The Control Plane a runner ships to, its token for it, and a client with both (a pod's seal step uses it too). */
export function shipperClient(env: NodeJS.ProcessEnv) {
  const found = discoverControlUrl(env);
  const { token, home } = controlToken(env, found);
  const client = createControlClient({ url: found.url, ...(token ? { token } : {}), timeoutMs: 10_000 });
  return { ...found, token, home, client };
}

/** What a batch answered `deleted` for `run` is to its worker (run-context.ts): a pod's run stops. */
export function deletedRun(run: string): ControlItem {
  return { run, action: 'deleted' };
}

/**
 * What the Control Plane's answer to a batch for `run` asks of its runner, read as untrusted (src/untrusted.ts): the
 * `control` requests that name a run and an action, and whether `deleted` lists `run` (a list only when it is one: a
 * text holding the run's id is no deletion of it).
 */
export function readIngestAnswer(result: unknown, run: string): { control: ControlItem[]; deleted: boolean } {
  const answer = obj(result);
  const control = list(answer.control).flatMap((item) => {
    const request = obj(item);
    const named = typeof request.run === 'string' && typeof request.action === 'string';
    return named ? [request as ControlItem] : [];
  });
  return { control, deleted: list(answer.deleted).includes(run) };
}

export function createShipper(
  dir: string, env: NodeJS.ProcessEnv, onControl?: (item: ControlItem) => void, onSkip?: SkipReport,
) {
  const { url, via, token, home, client } = shipperClient(env);
  const bare = home ? createControlClient({ url, timeoutMs: 10_000 }) : client;
  /** Asked before each flush: the home token goes to a server.json's URL only while that server runs (one read). */
  const senderNow = () => {
    if (!home || homeTokenGoes(env, { url, via })) return client;
    sayWithheld(url);
    return bare;
  };
  let sentToken = token !== undefined;
  const reported = new Set<string>();
  /** Whether this batch told something left out: the run's log holds a new line, which a last flush ships too. */
  let told = false;
  const skip: SkipReport = (entry, reason) => {
    if (reported.has(entry)) return;
    reported.add(entry);
    told = true;
    onSkip?.(entry, reason);
  };

  // A pod's run container, whose token may not say what only its signer says (withoutSignerWord).
  const agentSide = signsLater(env);
  let deleted = false;
  async function flushOnce(signal?: AbortSignal): Promise<boolean> {
    if (deleted) return false;
    signal?.throwIfAborted();
    told = false;
    const folder = openRunFolder(dir);
    if ('failed' in folder) {
      if (folder.kind !== 'missing') skip(folder.failed, skipReason(folder.kind));
      return false;
    }
    const [read, key] = withDir(folder, () =>
      [readRunBatch(folder, null, skip, true), readRunKey(folder, skip)] as const);
    if (!read) return false;
    for (const { bytes } of read.tooLong) {
      skip(REFUSED_LINES, `(left out; the first: a line of ${bytes} bytes, more than one batch to ingest carries)`);
    }
    const state = read.state as unknown as RunState;
    const now = Date.now();
    const { source: _source, ...json } = toRunJson(state);
    // The key binds the run to this folder's runners (src/control/ingest-apply.ts); a run from before keys has none.
    const run = key === null ? json : { ...json, run_key: key };
    const sender = senderNow();
    sentToken = sender === client && token !== undefined;
    const batch: IngestBatch = {
      source: state.source,
      // The run's folder goes only to a Control Plane on this machine, which keeps it only for a project its operator
      // registered, so Retry and Verify work there (src/control/handlers/ingest.ts).
      runs: [shippableRun(isSameMachine(url) ? { ...run, repo_path: state.repo_path } : run, state.source, now, skip)],
      events: read.lines.flatMap((line) => shippableEvent(line, state, now, skip)) as never,
      artifacts: read.artifacts.flatMap(({ rel, content }) => shippableArtifact(rel, content, state, skip)),
    };
    const sent = agentSide ? withoutSignerWord(batch, skip) : batch;
    const result = await sender.ingest(sent, signal).catch((err: unknown) => {
      throw err instanceof ControlApiError ? err : new SendError(errorMessage(err), { cause: err });
    });
    // Into the folder as it stands now, never made again: a run removed while its batch was on the way (its person
    // deleted it) stays removed, and has nothing more to ship.
    const standing = openRunFolder(dir);
    if (!('failed' in standing)) withDir(standing, () => writeJsonAtomic(pathIn(standing, 'ship.json'), read.next));
    const answer = readIngestAnswer(result, state.run);
    for (const item of answer.control) onControl?.(item);
    // Deleted on the Control Plane, the run's later batches would be dropped there too: none is sent.
    if (answer.deleted) {
      deleted = true;
      onControl?.(deletedRun(state.run));
    }
    return (read.more || told) && !deleted && !('failed' in standing);
  }

  return {
    url,
    /** Sends everything not yet accepted: null when the Control Plane took it all, else why not (`why` in words for
     * "not shipped: …"). `signal`, a worker's last ship's budget (createShipLoop), ends it early as a failure every run
     * would meet: no batch is sent after it, and one it cut short leaves ship.json as it was (the batch goes again,
     * and ingest takes it once). */
    async flush(signal?: AbortSignal): Promise<ShipFailure | null> {
      try {
        let more = true;
        for (let i = 0; i < 1000 && more; i++) more = await flushOnce(signal);
        return null;
      } catch (err) {
        if (!signal?.aborted) return { why: flushFailure(err, { url, via }, sentToken), everyRun: failsEveryRun(err) };
        return { why: `the Control Plane at ${url} did not answer within a last ship's ${LAST_SHIP_MS / 1000} s`,
          everyRun: true };
      }
    },
  };
}

/**
 * The most a worker's last ship (createShipLoop's close) takes in all before the run is left to the recovery
 * (markPending). Its worker clears its pid only after it (run-context.ts leave), and a resume or a verify waits at most
 * 10 s for that (launch.ts afterLastWorker) before it is refused: a Control Plane that takes the connection and never
 * answers would otherwise hold the worker for each flush's HTTP timeout, three times, some 40 s.
 */
const LAST_SHIP_MS = 5_000;

/** `changed()`: something of the run changed, so ship it soon. `lastShipMs`: the budget of close's last ship, null
 * for none (a pod's signer: its ship is the run's only record, and no command on this machine waits for it). */
export function createShipLoop(
  shipper: Shipper, dir: string, say: (text: string) => void, lastShipMs: number | null = LAST_SHIP_MS,
): { changed(): void; close(): Promise<void> } {
  let dirty = true;
  /** A flush is running or backing off: the next one is already timed. Otherwise, while dirty, one is due in 200 ms. */
  let held = false;
  let backoff = 0;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let shipping: Promise<unknown> = Promise.resolve();
  // Aborted once the last ship's time is up: the flush then running too, so none writes ship.json after it.
  const ending = new AbortController();

  function shipIn(ms: number): void {
    clearTimeout(timer);
    timer = setTimeout(() => {
      dirty = false;
      held = true;
      shipping = shipper.flush(ending.signal).then((failure) => {
        held = failure !== null;
        backoff = held ? Math.min(Math.max(backoff * 2, 250), 30_000) : 0;
        if (!closed) shipIn(backoff || (dirty ? 200 : 2_000));
      });
    }, ms).unref();
  }
  shipIn(200);

  return {
    changed() {
      if (dirty || closed) return;
      dirty = true;
      if (!held) shipIn(200);
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      const budget = lastShipMs === null ? undefined : setTimeout(() => ending.abort(), lastShipMs);
      let failure: ShipFailure | null = null;
      // The last attempt's that the budget did not cut short: what the Control Plane did (a 503's body) says more
      // than that the time ran out, which a pause between attempts can end in too.
      let answered: ShipFailure | null = null;
      try {
        await shipping;
        for (const wait of [0, 250, 1_000]) {
          if (wait) await sleep(wait, undefined, { signal: ending.signal }).catch(() => undefined);
          failure = await shipper.flush(ending.signal);
          if (failure === null) {
            clearPending(dir);
            return;
          }
          if (ending.signal.aborted) break;
          answered = failure;
        }
      } finally {
        clearTimeout(budget);
      }
      markPending(dir);
      const why = ending.signal.aborted && answered !== null
        ? `${answered.why}, then a last ship's ${lastShipMs! / 1000} s ran out` : failure?.why;
      say(`not shipped: ${why}; the next svc command in this project that reaches one sends this run ` +
        '(or run `svc ship`)');
    },
  };
}
