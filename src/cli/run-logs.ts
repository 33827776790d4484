// A run's output (`log` events) for `svc runs logs` and `svc start --follow`, from its events.jsonl or the Control
// Plane, followed until the run ends. Event data is untrusted: read through typed readers only.
import { closeSync, constants, openSync, readSync, fstatSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { eventsPath, runDir } from '../engine/paths.ts';
import { repoRoot } from '../engine/git.ts';
import { localRun, projectHoldingToo, tryReadState, type RunState } from '../engine/run-state.ts';
import { isValidSegment } from '../engine/ids.ts';
import { workerAlive } from '../engine/proc-group.ts';
import { TERMINAL } from '../run-json.ts';
import { RUN_CONTAINER } from '../engine/run-event.ts';
import { objOrNull, str, tryParseJson } from '../untrusted.ts';
import { orNull } from '../spawn/tree.ts';
import { ControlApiError, type ControlClient } from '../client/client.ts';
import type { RunRef } from '../client/types.ts';

const POLL_MS = 200;
/** How svc's own lines begin (logLine), after any spaces a terminal would not show. */
const NOTE_LABEL = /^[\s\u0000-\u001f\u007f]*\[(svc|run container|agent)\]/;

/**
 * The line an event shows as, or null when it is not output; `agentOnly` drops svc's own notes (`svc start -f`). A
 * line ingest marked as a pod's run container's (its agent could write it) is labelled its, not svc's.
 */
function logLine(kind: string, data: unknown, agentOnly = false): string | null {
  const d = objOrNull(data);
  if (!d) return null;
  const who = str(d.by) === RUN_CONTAINER ? '[run container]' : '[svc]';
  if (kind === 'log') {
    const text = str(d.text);
    if (text === null) return null;
    // The agent's own words stay as it wrote them, but one that starts as svc's notes do is labelled its: an agent
    // could otherwise print "[svc] status succeeded" into a run that failed.
    if (str(d.stream) !== 'svc') return NOTE_LABEL.test(text) ? `[agent] ${text}` : text;
    return agentOnly ? null : `${who} ${text}`;
  }
  if (kind === 'run.status' && !agentOnly) {
    const to = str(d.to);
    return to === null ? null : `[svc] status ${to}`;
  }
  if (kind === 'error' && !agentOnly) {
    const message = str(d.message);
    return message === null ? null : `${who} error: ${message}`;
  }
  if (kind === 'question') {
    const question = str(d.question);
    return question === null ? null : `[svc] blocked, waiting for an answer: ${question}`;
  }
  return null;
}

// A run folder may be a checkout's: a link at events.jsonl is not followed, nor may a FIFO block the open.
const EVENTS_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Reads events.jsonl from where it left off; only whole lines (a line being appended waits for its newline). */
export function createEventTail(runDir: string): () => Array<{ kind: string; data: unknown }> {
  let offset = 0;
  let rest = '';
  return () => {
    const fd = orNull(() => openSync(eventsPath(runDir), EVENTS_FLAGS));
    if (fd === null) return [];
    let text = rest;
    try {
      if (!fstatSync(fd).isFile()) return [];
      const added = Buffer.alloc(Math.max(0, fstatSync(fd).size - offset));
      const n = readSync(fd, added, 0, added.length, offset);
      offset += n;
      text += added.toString('utf8', 0, n);
    } finally {
      closeSync(fd);
    }
    const lines = text.split('\n');
    rest = lines.pop() ?? '';
    const events: Array<{ kind: string; data: unknown }> = [];
    for (const line of lines) {
      // A line that is not JSON is not an event: skipped.
      const event = objOrNull(tryParseJson(line));
      const kind = event ? str(event.kind) : null;
      if (event && kind !== null) events.push({ kind, data: event.data });
    }
    return events;
  };
}

/** The run has ended, or its worker is gone without saying so (a crash): either way nothing more will be written.
 * Without a recorded start time (no /proc) the worker cannot be told from another process: followed to the end. */
function finished(state: RunState | null): boolean {
  if (!state || TERMINAL.has(state.status)) return true;
  return state.pid !== null && state.proc_start !== null && !workerAlive(state);
}

/** Prints the run's output lines from its folder; with `follow`, until the run has ended or `until` says so. */
export async function printLocalLogs(
  runDir: string, print: (line: string) => void,
  opts: { follow: boolean; until?: () => boolean; agentOnly?: boolean; tail?: ReturnType<typeof createEventTail> },
): Promise<void> {
  const tail = opts.tail ?? createEventTail(runDir);
  let lastStatus: string | null = null;
  const flush = () => {
    for (const e of tail()) {
      if (e.kind === 'run.status') lastStatus = str(objOrNull(e.data)?.to) ?? lastStatus;
      const line = logLine(e.kind, e.data, opts.agentOnly);
      if (line !== null) print(`${line}\n`);
    }
  };
  flush();
  if (!opts.follow) return;
  const done = opts.until ?? (() => finished(tryReadState(runDir)));
  // The state is read before the last flush: whatever the run wrote before it ended is printed.
  while (!done()) {
    await delay(POLL_MS);
    flush();
  }
  flush();
  // A worker writes state.json before the status event that goes with it (run-context.ts setStatus says why): a run
  // read as ended may not have its last status line on disk yet. Waited for, a little (a worker that died between the
  // two never writes it).
  const ended = tryReadState(runDir)?.status;
  for (let i = 0; ended !== undefined && TERMINAL.has(ended) && lastStatus !== ended && i < 10; i++) {
    await delay(POLL_MS);
    flush();
  }
}

const APPEAR_MS = 15_000;

/**
 * For -f: a run `svc start --detach` made a moment ago may not have reached the Control Plane yet (its worker ships
 * within a second or so), so a run it does not know is asked for again, once said, for up to APPEAR_MS; then its
 * not_found goes on as it would have at once.
 */
export async function waitForRun(client: ControlClient, ref: RunRef, say: (text: string) => void): Promise<void> {
  const until = performance.now() + APPEAR_MS;
  for (let said = false; ; said = true) {
    try {
      await client.getRun(ref);
      return;
    } catch (err) {
      if (!(err instanceof ControlApiError) || err.code !== 'not_found' || performance.now() > until) throw err;
      if (!said) say(`waiting up to ${APPEAR_MS / 1000} s for the Control Plane to hear of ${ref.source}/${ref.run}\n`);
      await delay(POLL_MS);
    }
  }
}

/** As printLocalLogs, for a run only the Control Plane has: pages of its events, then its live stream till it ends. */
export async function printControlLogs(
  client: ControlClient, ref: RunRef, print: (line: string) => void, follow: boolean,
): Promise<void> {
  let last = 0;
  const show = (kind: string, data: unknown) => {
    const line = logLine(kind, data);
    if (line !== null) print(`${line}\n`);
  };
  const catchUp = async () => {
    for (;;) {
      const page = await client.events(ref, { after: last, limit: 500 });
      for (const e of page.items) {
        show(e.kind, e.data);
        last = Math.max(last, e.id);
      }
      if (!page.next_cursor || page.items.length === 0) return;
    }
  };
  // Asked before the catch-up: a run that had ended then has all its events in it.
  const endedAlready = follow && TERMINAL.has((await client.getRun(ref)).status);
  await catchUp();
  if (!follow || endedAlready) return;
  const abort = new AbortController();
  // The stream says nothing when a run ends without a status event (a runner's ingest of its final state): ask.
  const watcher = (async () => {
    while (!abort.signal.aborted) {
      await delay(2_000, undefined, { signal: abort.signal });
      if (TERMINAL.has((await client.getRun(ref)).status)) abort.abort();
    }
  })().catch(() => abort.abort());
  try {
    for await (const message of client.streamRun(ref, { after: last, signal: abort.signal })) {
      const id = Number(message.id);
      if (Number.isSafeInteger(id) && id <= last) continue;
      const event = objOrNull(message.data);
      show(message.event, event ? event.data : null);
      if (Number.isSafeInteger(id)) last = id;
      const status = message.event === 'run.status' ? str(objOrNull(event?.data)?.to) : null;
      if (status !== null && TERMINAL.has(status)) break;
    }
  } finally {
    abort.abort();
    await watcher;
  }
  await catchUp();
}

/**
 * A run svc made in this project's `.svc/runs/`, found from a folder inside it as localRuns finds runs (no link
 * followed, no folder git tracks: a cloned repository's is whoever pushed it's); `source` null takes any (a bare id)
 * whose source is a well-formed one, since `svc answer` makes the answer file's path from it.
 */
export function findLocalRun(dir: string, source: string | null, run: string): { dir: string; state: RunState } | null {
  const root = repoRoot(dir);
  for (const inner of root === null || root === dir ? [dir] : [root, dir]) {
    // In a repository inside the project's tree (a run's worktree, one an agent made), the project's run.
    const project = projectHoldingToo(inner, run) ?? inner;
    const state = localRun(project, run);
    if (state && isValidSegment(state.source) && (source === null || state.source === source)) {
      return { dir: runDir(project, run), state };
    }
  }
  return null;
}
