// One batch of a run folder as ingest takes it: events.jsonl read in windows counted in bytes, the artifacts and
// the run's key, from ship.json's offsets; the shipper sends it, /v1/import reads it (docs/control-data.md).
import { closeSync, fstatSync } from 'node:fs';
import { basename } from 'node:path';
import { hash } from 'node:crypto';
import { withDir } from './safe-fs.ts';
import { RUN_KEY } from './ids.ts';
import { RUN_KEY_FILE } from './paths.ts';
import {
  openPlainDirIn, openPlainFileIn, readObjectIn, readPlainIn, readRange, skipReason, walkPlainTree,
  type PlainDir, type TreeFile,
} from './plain-tree.ts';
import { isJsonObject } from '../json-value.ts';
import { orNull } from '../spawn/tree.ts';
import { tryParseJson } from '../untrusted.ts';

const EVENTS_PER_BATCH = 500;
/** What one batch carries, in bytes as its JSON body counts them (events re-serialised, artifacts in base64 with
 * their names): under ingest's 16 MiB body cap (control/app.ts INGEST_LIMIT), with room for the run's state (1 MiB at
 * most) and the `run` field each event gains. An import reads its batches this size too, though it sends no body. */
const BATCH_BYTES = 14 * 1024 * 1024;
/** The longest line an import (`svc control import`, the start-up scan) takes: it sends no HTTP body, so BATCH_BYTES
 * does not bound it; this is the window every read of events.jsonl had before batches were counted in bytes. */
export const IMPORT_LINE_BYTES = 16 * 1024 * 1024;
/** Counted for each event beyond its line's bytes: the `"run":"<id>"` the batch adds to it, and a comma. */
const EVENT_OVERHEAD = 128;
const MAX_ARTIFACT = 8 * 1024 * 1024;
const MAX_ARTIFACT_DEPTH = 16;

export interface ShipOffsets {
  events_offset: number;
  artifacts: Record<string, string>;
}

/** One batch of a run folder, read after `from`; `next` is where the following batch starts. */
export interface RunBatch {
  state: Record<string, unknown>;
  /** Complete lines of events.jsonl (blank ones included, so a caller can count them). */
  lines: string[];
  artifacts: TreeFile[];
  /** The lines left out for their length (each a blank one in `lines`): its place there, and its bytes. */
  tooLong: Array<{ index: number; bytes: number }>;
  next: ShipOffsets;
  more: boolean;
}

/** Told once per entry (a path under the run folder, or the folder itself) that it was left out, and why. */
export type SkipReport = (entry: string, reason: string) => void;

/** The offset of the first newline at or after `from`, or null when the file ends first (a line being written). */
function newlineFrom(fd: number, from: number): number | null {
  for (let at = from; ; ) {
    const chunk = readRange(fd, at, 1024 * 1024);
    if (chunk.length === 0) return null;
    const nl = chunk.indexOf(10);
    if (nl !== -1) return at + nl;
    at += chunk.length;
  }
}

/**
 * The bytes a line takes in the shipper's batch body: the event re-serialised (JSON.stringify writes `1e20` as 21
 * digits, a `\u00e9` as the two bytes of é) with EVENT_OVERHEAD for its `run`; none for a line it leaves out as not
 * a JSON object, or as nesting too deep to serialise (shipper.ts shippableEvent, run-event.ts eventRefusal).
 */
function carriedBytes(line: string): number {
  const parsed = tryParseJson(line);
  if (!isJsonObject(parsed)) return 0;
  return orNull(() => Buffer.byteLength(JSON.stringify(parsed)) + EVENT_OVERHEAD) ?? 0;
}

/**
 * Complete lines from `offset` that fit one batch (BATCH_BYTES, at most EVENTS_PER_BATCH), the byte offset after the
 * last one taken, and the bytes they count: for the shipper (`ship`) as its body carries them (carriedBytes), else as
 * read. A line longer than one batch carries (the shipper: ingest would refuse its body with 413, and every later
 * batch with it) or than IMPORT_LINE_BYTES (an import) is left out, in `tooLong`: a blank line stands in its place, so
 * a caller counts it. An import takes a longer line alone in its batch.
 */
function readEventLines(
  folder: PlainDir, offset: number, skip: SkipReport, ship: boolean,
): { lines: string[]; tooLong: RunBatch['tooLong']; next: number; bytes: number; full: boolean } {
  const lines: string[] = [];
  const tooLong: RunBatch['tooLong'] = [];
  const fd = openPlainFileIn(folder, 'events.jsonl');
  if (typeof fd === 'string') {
    if (fd !== 'missing') skip('events.jsonl', skipReason(fd));
    return { lines, tooLong, next: offset, bytes: 0, full: false };
  }
  const limit = ship ? BATCH_BYTES : IMPORT_LINE_BYTES;
  let bytes = 0;
  try {
    for (;;) {
      const buf = readRange(fd, offset, Math.max(0, Math.min(fstatSync(fd).size - offset, BATCH_BYTES)));
      // A full window: the file may go on past it, so another batch follows.
      const window = buf.length === BATCH_BYTES;
      let pos = 0;
      // A last line without its newline is still being written: left for the next read.
      for (let nl = buf.indexOf(10); nl !== -1; nl = buf.indexOf(10, pos)) {
        const line = buf.subarray(pos, nl).toString('utf8');
        const size = ship ? carriedBytes(line) : nl - pos;
        const full = bytes + size > BATCH_BYTES && lines.length > 0;
        if (full || lines.length === EVENTS_PER_BATCH) return { lines, tooLong, next: offset + pos, bytes, full: true };
        if (size > limit) tooLong.push({ index: lines.length, bytes: nl - pos });
        lines.push(size > limit ? '' : line);
        bytes += size > limit ? 0 : size;
        pos = nl + 1;
      }
      if (pos > 0 || !window) return { lines, tooLong, next: offset + pos, bytes, full: window };
      const end = newlineFrom(fd, offset + buf.length);
      if (end === null) return { lines, tooLong, next: offset, bytes, full: false };
      // Longer than the window: the shipper's limit is the window, so only an import takes it.
      if (end - offset <= limit && !ship) {
        lines.push(readRange(fd, offset, end - offset).toString('utf8'));
        return { lines, tooLong, next: end + 1, bytes: bytes + end - offset, full: true };
      }
      tooLong.push({ index: lines.length, bytes: end - offset });
      lines.push('');
      offset = end + 1;
    }
  } finally {
    closeSync(fd);
  }
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
export function readRunKey(folder: PlainDir, skip: SkipReport): string | null {
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

/**
 * The next batch after `from` (else after ship.json's offsets); null without a state.json of this folder's run. `ship`:
 * counted as the shipper's HTTP body carries it, else as an import reads it (readEventLines).
 */
export function readRunBatch(
  folder: PlainDir, from: ShipOffsets | null, skip: SkipReport, ship: boolean,
): RunBatch | null {
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
  const read = readEventLines(folder, offsets.events_offset, skip, ship);
  const { lines, tooLong, next } = read;
  const artifacts: TreeFile[] = [];
  const sent = { ...offsets.artifacts };
  let bytes = read.bytes;
  let full = read.full;
  for (const file of readArtifacts(folder, skip)) {
    const sha = hash('sha256', file.content, 'hex');
    if (offsets.artifacts[file.rel] === sha) continue;
    // Base64 as the batch carries it, and its name in UTF-8 as JSON writes it; one artifact (MAX_ARTIFACT) always fits
    // an empty batch.
    const path = Buffer.byteLength(JSON.stringify(file.rel));
    const size = Math.ceil(file.content.length / 3) * 4 + path + EVENT_OVERHEAD;
    if (bytes + size > BATCH_BYTES && (artifacts.length > 0 || lines.length > 0)) {
      full = true;
      break;
    }
    bytes += size;
    artifacts.push(file);
    sent[file.rel] = sha;
  }
  return { state, lines, artifacts, tooLong, next: { events_offset: next, artifacts: sent }, more: full };
}
