// Sends a run folder to the Control Plane (POST /v1/ingest), resumable from ship.json (/v1/import reads it too);
// when a run ships, and the one recovery (docs/engine.md "Shipping to the Control Plane").
import { closeSync, fstatSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { createControlClient, ControlApiError } from '../client/client.ts';
import type { IngestBatch, IngestResult } from '../client/types.ts';
import { controlToken, discoverControlUrl, homeTokenGoes, isSameMachine, sayWithheld } from './control-url.ts';
import { makePlainPath, withDir, writeJsonAtomic, writeNoFollowIn } from './safe-fs.ts';
import { isValidSegment, RUN_KEY } from './ids.ts';
import { RUN_KEY_FILE, runDir } from './paths.ts';
import { errorMessage } from '../errors.ts';
import { toRunJson, type RunState } from './run-state.ts';
import { contentTypeOf, OCTET_STREAM } from '../http/static-files.ts';
import {
  openPlainDirIn, openPlainFileIn, openPlainPath, openRunFolder, pathIn, plainEntries, readObjectIn, readPlainIn,
  readRange, skipReason, walkPlainTree,
  type PlainDir, type TreeFile,
} from './plain-tree.ts';
import { isJsonObject, list, obj, tryParseJson, type Obj } from '../untrusted.ts';
import { eventRefusal, isArtifactPath } from './run-event.ts';
import { realOrNull } from '../spawn/tree.ts';

const EVENTS_PER_BATCH = 500;
const ARTIFACT_BYTES_PER_BATCH = 8 * 1024 * 1024;
const MAX_ARTIFACT = 8 * 1024 * 1024;
const MAX_ARTIFACT_DEPTH = 16;

export interface ShipOffsets {
  events_offset: number;
  artifacts: Record<string, string>;
}

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

/** What stopped a flush: nothing answered, the token was refused, or what the Control Plane answered instead. */
function flushFailure(err: unknown, url: string, hasToken: boolean): string {
  if (!(err instanceof ControlApiError)) return `shipping to ${url} failed (${errorMessage(err)})`;
  if (err.status === 0) return `no Control Plane answered at ${url}`;
  if (err.status === 401) {
    return hasToken
      ? `the Control Plane at ${url} refused the token (401 unauthorized: the token this run sent is not its token)`
      : `the Control Plane at ${url} needs a token (401 unauthorized: set SVC_CONTROL_TOKEN or SVC_CONTROL_TOKEN_FILE)`;
  }
  return `the Control Plane at ${url} answered ${err.status} ${err.code} (${err.message})`;
}

/** One batch of a run folder, read after `from`; `next` is where the following batch starts. */
export interface RunBatch {
  state: Record<string, unknown>;
  /** Complete lines of events.jsonl (blank ones included, so a caller can count them). */
  lines: string[];
  artifacts: TreeFile[];
  next: ShipOffsets;
  more: boolean;
}

/** Told once per entry (a path under the run folder, or the folder itself) that it was left out, and why. */
type SkipReport = (entry: string, reason: string) => void;

/** Complete lines from `offset`, and the byte offset after the last one taken. */
function readEventLines(folder: PlainDir, offset: number, skip: SkipReport): { lines: string[]; next: number } {
  const fd = openPlainFileIn(folder, 'events.jsonl');
  if (typeof fd === 'string') {
    if (fd !== 'missing') skip('events.jsonl', skipReason(fd));
    return { lines: [], next: offset };
  }
  let buf: Buffer;
  try {
    buf = readRange(fd, offset, Math.max(0, Math.min(fstatSync(fd).size - offset, 16 * 1024 * 1024)));
  } finally {
    closeSync(fd);
  }
  const lines: string[] = [];
  let pos = 0;
  // A last line without its newline is still being written: left for the next read.
  for (let nl = buf.indexOf(10); nl !== -1 && lines.length < EVENTS_PER_BATCH; nl = buf.indexOf(10, pos)) {
    lines.push(buf.subarray(pos, nl).toString('utf8'));
    pos = nl + 1;
  }
  return { lines, next: offset + pos };
}

function readArtifacts(folder: PlainDir, skip: SkipReport): TreeFile[] {
  const dir = openPlainDirIn(folder, 'artifacts');
  if (typeof dir === 'string') {
    if (dir !== 'missing') skip('artifacts', skipReason(dir));
    return [];
  }
  const files: TreeFile[] = [];
  const skipIn = (rel: string, why: string) => skip(`artifacts/${rel}`, why);
  const opts = { maxFile: MAX_ARTIFACT, maxDepth: MAX_ARTIFACT_DEPTH, skip: skipIn };
  withDir(dir, () => walkPlainTree(dir, opts, (file) => {
    if (!file.rel.endsWith('.tmp')) files.push(file);
  }));
  return files;
}

/** The key the run's worker made (run-state.ts makeRunKey); null for a run from before keys. */
function readRunKey(folder: PlainDir, skip: SkipReport): string | null {
  const raw = readPlainIn(folder, RUN_KEY_FILE, 1024);
  if (typeof raw !== 'string') return raw.toString('utf8').trim() || null;
  if (raw !== 'missing') skip(RUN_KEY_FILE, skipReason(raw, 1024));
  return null;
}

/**
 * The folder's key as the Control Plane binds one (an import, a resume or verify it launches: docs/control-data.md,
 * "Each run's own runner"), read following no link; null when there is none or it is malformed (reported).
 */
export function readBindableRunKey(folder: PlainDir, skip: SkipReport): string | null {
  const key = readRunKey(folder, skip);
  if (key === null || RUN_KEY.test(key)) return key;
  skip(RUN_KEY_FILE, `must match ${RUN_KEY.source}`);
  return null;
}

/** The next batch after `from` (else after ship.json's offsets); null without a state.json of this folder's run. */
export function readRunBatch(folder: PlainDir, from: ShipOffsets | null, skip: SkipReport): RunBatch | null {
  const state = readObjectIn(folder, 'state.json', skip);
  if (!state) return null;
  // The folder names the run: a state.json claiming another run (edited by whoever can write the project) would
  // otherwise overwrite that run's row with this folder's story.
  const name = basename(folder.path);
  if (state.run !== name) {
    skip('state.json', `names run "${String(state.run)}", not "${name}"`);
    return null;
  }
  const saved = from ? null : readObjectIn(folder, 'ship.json', skip) as Partial<ShipOffsets> | null;
  const offsets = from ?? { events_offset: Number(saved?.events_offset) || 0, artifacts: saved?.artifacts ?? {} };
  const { lines, next } = readEventLines(folder, offsets.events_offset, skip);
  const artifacts: TreeFile[] = [];
  const sent = { ...offsets.artifacts };
  let bytes = 0;
  let full = false;
  for (const file of readArtifacts(folder, skip)) {
    const sha = createHash('sha256').update(file.content).digest('hex');
    if (offsets.artifacts[file.rel] === sha) continue;
    full = bytes + file.content.length > ARTIFACT_BYTES_PER_BATCH && artifacts.length > 0;
    if (full) break;
    bytes += file.content.length;
    artifacts.push(file);
    sent[file.rel] = sha;
  }
  const more = full || lines.length === EVENTS_PER_BATCH;
  return { state, lines, artifacts, next: { events_offset: next, artifacts: sent }, more };
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
  skip('events.jsonl lines ingest refuses', `(left out; the first: ${why})`);
  return [];
}

/** An artifact as its run's batch carries it, or nothing: one whose name ingest refuses is left out (said once), as
 * a bad event line is, rather than get every batch refused (an agent names the files it leaves). */
function shippableArtifact(
  rel: string, content: Buffer, state: RunState, skip: SkipReport,
): NonNullable<IngestBatch['artifacts']> {
  if (!isArtifactPath(rel)) {
    skip(`artifacts/${rel}`, 'left out: ingest takes only a name relative with no "..", NUL or backslash');
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
  const skip: SkipReport = (entry, reason) => {
    if (reported.has(entry)) return;
    reported.add(entry);
    onSkip?.(entry, reason);
  };

  let deleted = false;
  async function flushOnce(): Promise<boolean> {
    if (deleted) return false;
    const folder = openRunFolder(dir);
    if ('failed' in folder) {
      if (folder.kind !== 'missing') skip(folder.failed, skipReason(folder.kind));
      return false;
    }
    let read: RunBatch | null;
    let key: string | null;
    try {
      read = readRunBatch(folder, null, skip);
      key = readRunKey(folder, skip);
    } finally {
      folder.close();
    }
    if (!read) return false;
    const state = read.state as unknown as RunState;
    const now = Date.now();
    const { source: _source, ...json } = toRunJson(state);
    // The key binds the run to this folder's runners (src/control/ingest-apply.ts); a run from before keys has none.
    const run = key === null ? json : { ...json, run_key: key };
    const sender = senderNow();
    sentToken = sender === client && token !== undefined;
    const result = await sender.ingest({
      source: state.source,
      // The run's folder goes only to a Control Plane on this machine, which keeps it only for a project its operator
      // registered, so Retry and Verify work there (src/control/handlers/ingest.ts).
      runs: [isSameMachine(url) ? { ...run, repo_path: state.repo_path } : run],
      events: read.lines.flatMap((line) => shippableEvent(line, state, now, skip)) as never,
      artifacts: read.artifacts.flatMap(({ rel, content }) => shippableArtifact(rel, content, state, skip)),
    }).catch((err: unknown) => {
      throw err instanceof ControlApiError ? err : new SendError(errorMessage(err), { cause: err });
    });
    writeJsonAtomic(join(dir, 'ship.json'), read.next);
    const answer = readIngestAnswer(result, state.run);
    for (const item of answer.control) onControl?.(item);
    // Deleted on the Control Plane, the run's later batches would be dropped there too: none is sent.
    if (answer.deleted) {
      deleted = true;
      onControl?.(deletedRun(state.run));
    }
    return read.more && !deleted;
  }

  return {
    url,
    /** Sends everything not yet accepted: null when the Control Plane took it all, else why not (`why` in words for
     * "not shipped: …"). */
    async flush(): Promise<ShipFailure | null> {
      try {
        let more = true;
        for (let i = 0; i < 1000 && more; i++) more = await flushOnce();
        return null;
      } catch (err) {
        return { why: flushFailure(err, url, sentToken), everyRun: failsEveryRun(err) };
      }
    },
  };
}

/** The project of a run folder `<repo>/.svc/runs/<run>`. */
function projectOf(dir: string): string {
  return dirname(dirname(dirname(dir)));
}

export function markPending(dir: string): void {
  try {
    const pending = makePlainPath(projectOf(dir), ['.svc', 'ship-pending'], 0o777);
    withDir(pending, () => writeNoFollowIn(pending, basename(dir), ''));
  } catch {
    // a project svc cannot write: `svc ship` remains the way
  }
}

function clearPending(dir: string): void {
  // Inside .svc/ship-pending held open: a link the repository commits there is not followed to remove a file.
  const project = projectOf(dir);
  const pending = openPlainPath(realOrNull(project) ?? project, ['.svc', 'ship-pending']);
  if ('failed' in pending) return;
  withDir(pending, () => rmSync(pathIn(pending, basename(dir)), { force: true }));
}

/** `changed()`: something of the run changed, so ship it soon. */
export function createShipLoop(
  shipper: Shipper, dir: string, say: (text: string) => void,
): { changed(): void; close(): Promise<void> } {
  let dirty = true;
  /** A flush is running or backing off: the next one is already timed. Otherwise, while dirty, one is due in 200 ms. */
  let held = false;
  let backoff = 0;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let shipping: Promise<unknown> = Promise.resolve();

  function shipIn(ms: number): void {
    clearTimeout(timer);
    timer = setTimeout(() => {
      dirty = false;
      held = true;
      shipping = shipper.flush().then((failure) => {
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
      await shipping;
      let failure: ShipFailure | null = null;
      for (const wait of [0, 250, 1_000]) {
        if (wait) await sleep(wait);
        failure = await shipper.flush();
        if (failure === null) {
          clearPending(dir);
          return;
        }
      }
      markPending(dir);
      say(`not shipped: ${failure?.why}; the next svc command in this project that reaches one sends this run ` +
        '(or run `svc ship`)');
    },
  };
}

/** Runs waiting to be shipped in `repo`, oldest name first. */
export function pendingRuns(repo: string): string[] {
  return plainEntries(repo, ['.svc', 'ship-pending'], 'file').filter(isValidSegment);
}

/**
 * Ships `runs` while `budgetMs` lasts, each whole one losing its marker. A run refused on its own (403
 * forbidden_run, a bad batch, an unreadable folder) holds back no other: each is in `failures`, and loses its marker
 * too, since it would be refused again before every later command (`svc ship` still tries it). Only a failure every
 * run would meet now (failsEveryRun) ends the pass there, every marker kept.
 */
export async function shipRuns(
  repo: string, runs: string[], env: NodeJS.ProcessEnv,
  opts: { budgetMs?: number; onSkip?: (run: string, entry: string, reason: string) => void } = {},
): Promise<{ shipped: string[]; left: string[]; url: string | null; failures: Array<ShipFailure & { run: string }> }> {
  const shipped: string[] = [];
  const failures: Array<ShipFailure & { run: string }> = [];
  let url: string | null = null;
  const deadline = performance.now() + (opts.budgetMs ?? Infinity);
  for (const run of runs) {
    if (performance.now() > deadline) break;
    const dir = runDir(repo, run);
    const shipper = createShipper(dir, env, undefined, opts.onSkip && ((entry, why) => opts.onSkip!(run, entry, why)));
    url = shipper.url;
    const failure = await shipper.flush();
    if (failure !== null) failures.push({ run, ...failure });
    if (failure?.everyRun) break;
    clearPending(dir);
    if (failure === null) shipped.push(run);
  }
  return { shipped, left: runs.filter((r) => !shipped.includes(r)), url, failures };
}
