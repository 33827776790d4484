// Sends a run folder to the Control Plane (POST /v1/ingest), resumable from ship.json; /v1/import reads it too.
import { closeSync, fstatSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { createHash } from 'node:crypto';
import { createControlClient, ControlApiError, type ControlClient } from '../client/client.ts';
import type { IngestResult } from '../client/types.ts';
import { discoverControlUrl } from '../client/server-record.ts';
import { writeJsonAtomic } from './safe-fs.ts';
import { errorMessage } from '../errors.ts';
import { toRunJson, type RunState } from './run-state.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { isLoopbackHost } from '../http/guards.ts';
import { contentTypeOf, OCTET_STREAM } from '../http/static-files.ts';
import {
  openPlainDirIn, openPlainFileIn, openRunFolder, readObjectIn, readRange, skipReason, walkPlainTree,
  type PlainDir, type TreeFile,
} from './plain-tree.ts';
import { tryParseJson } from '../untrusted.ts';

const EVENTS_PER_BATCH = 500;
const ARTIFACT_BYTES_PER_BATCH = 8 * 1024 * 1024;
const MAX_ARTIFACT = 8 * 1024 * 1024;
const MAX_ARTIFACT_DEPTH = 16;

export interface ShipOffsets {
  events_offset: number;
  artifacts: Record<string, string>;
}

export type ControlItem = IngestResult['control'][number];

export type Shipper = ReturnType<typeof createShipper>;

/** What stopped a flush: nothing answered, the token was refused, or what the Control Plane answered instead. */
function failureOf(err: unknown, url: string, hasToken: boolean): string {
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
  try {
    const files: TreeFile[] = [];
    const skipIn = (rel: string, why: string) => skip(`artifacts/${rel}`, why);
    walkPlainTree(dir, { maxFile: MAX_ARTIFACT, maxDepth: MAX_ARTIFACT_DEPTH, skip: skipIn }, (file) => {
      if (!file.rel.endsWith('.tmp')) files.push(file);
    });
    return files;
  } finally {
    dir.close();
  }
}

/** Whether the Control Plane at `url` is this machine's: only it may learn a run's folder or get the home token. */
function sameMachine(url: string): boolean {
  return isLoopbackHost(URL.parse(url)?.hostname ?? '');
}

/** SVC_CONTROL_TOKEN_FILE, then ~/.svc/control/token (this machine's, never for a remote `url`), SVC_CONTROL_TOKEN. */
export function readControlToken(env: NodeJS.ProcessEnv, url: string): string | undefined {
  const home = sameMachine(url) ? join(svcHomeOf(env), 'control', 'token') : undefined;
  for (const file of [env.SVC_CONTROL_TOKEN_FILE, home]) {
    try {
      const token = file ? readFileSync(file, 'utf8').trim() : '';
      if (token) return token;
    } catch {
      // missing: the next source
    }
  }
  return env.SVC_CONTROL_TOKEN || undefined;
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

export function createShipper(
  dir: string, env: NodeJS.ProcessEnv, onControl?: (item: ControlItem) => void, onSkip?: SkipReport,
) {
  const { url } = discoverControlUrl(env);
  const token = readControlToken(env, url);
  const client: ControlClient = createControlClient({ url, ...(token ? { token } : {}), timeoutMs: 10_000 });
  const reported = new Set<string>();
  const skip: SkipReport = (entry, reason) => {
    if (reported.has(entry)) return;
    reported.add(entry);
    onSkip?.(entry, reason);
  };

  async function flushOnce(): Promise<boolean> {
    const folder = openRunFolder(dir);
    if ('failed' in folder) {
      if (folder.kind !== 'missing') skip(folder.failed, skipReason(folder.kind));
      return false;
    }
    let read: RunBatch | null;
    try {
      read = readRunBatch(folder, null, skip);
    } finally {
      folder.close();
    }
    if (!read) return false;
    const state = read.state as unknown as RunState;
    const { source: _source, ...run } = toRunJson(state);
    const result = await client.ingest({
      source: state.source,
      // The run's folder goes only to a Control Plane on this machine, which keeps it only for a project its operator
      // registered, so Retry and Verify work there (src/control/handlers/ingest.ts).
      runs: [sameMachine(url) ? { ...run, repo_path: state.repo_path } : run],
      // A line that is not JSON is skipped rather than blocking every later event.
      events: read.lines.flatMap((line) => {
        const event = tryParseJson(line);
        return event === undefined ? [] : [{ ...(event as object), run: state.run }];
      }) as never,
      artifacts: read.artifacts.map(({ rel, content }) => ({
        run: state.run, path: rel, content_type: contentTypeOf(rel) ?? OCTET_STREAM,
        content_base64: content.toString('base64'),
      })),
    });
    writeJsonAtomic(join(dir, 'ship.json'), read.next);
    for (const item of result.control ?? []) onControl?.(item);
    return read.more;
  }

  let failure: string | null = null;
  return {
    url,
    /** Why the last flush failed, in words for "not shipped: …" (null after a flush that worked). */
    failure: (): string | null => failure,
    /** Sends everything not yet accepted; true when the Control Plane took it all. */
    async flush(): Promise<boolean> {
      try {
        let more = true;
        for (let i = 0; i < 1000 && more; i++) more = await flushOnce();
        failure = null;
        return true;
      } catch (err) {
        failure = failureOf(err, url, token !== undefined);
        return false;
      }
    },
  };
}
