// Sends a run's state, events and artifacts to the Control Plane (POST /v1/ingest), batched and resumable from
// ship.json. A Control Plane that is down never fails a run: flush() reports false and the caller tries again later
// (or `svc ship`).
// Nothing is read through a symbolic link (src/engine/plain-tree.ts): a linked .svc, runs or run folder, state.json,
// events.jsonl, artifacts/, artifact subfolder or file is left out and reported once through `onSkip`.
import { closeSync, fstatSync } from 'node:fs';
import { basename, join, extname } from 'node:path';
import { createHash } from 'node:crypto';
import { createControlClient, ControlApiError, type ControlClient } from '../client/client.ts';
import { discoverControlUrl } from '../client/discover.ts';
import { writeJsonAtomic } from './atomic.ts';
import { toRunJson, type RunState } from './run-state.ts';
import { readControlToken } from './control-token.ts';
import {
  openPlainDirIn, openPlainFileIn, openRunFolder, readPlainIn, readPlainTree, readRange, skipReason, type PlainDir,
  type TreeFile,
} from './plain-tree.ts';

export const EVENTS_PER_BATCH = 500;
const ARTIFACT_BYTES_PER_BATCH = 8 * 1024 * 1024;
const MAX_ARTIFACT = 8 * 1024 * 1024;
const MAX_STATE = 1024 * 1024;
const MAX_ARTIFACT_DEPTH = 16;

interface ShipOffsets {
  events_offset: number;
  artifacts: Record<string, string>;
}

export interface ControlItem {
  run: string;
  action: string;
  [key: string]: unknown;
}

export interface Shipper {
  /** Sends everything not yet accepted; true when the Control Plane took it all. */
  flush(): Promise<boolean>;
  url: string;
  /** Why the last flush failed, in words for "not shipped: …" (null after a flush that worked). */
  failure(): string | null;
}

/** What stopped a flush: nothing answered, the token was refused, or what the Control Plane answered instead. */
function failureOf(err: unknown, url: string, hasToken: boolean): string {
  if (!(err instanceof ControlApiError)) {
    return `shipping to ${url} failed (${err instanceof Error ? err.message : String(err)})`;
  }
  if (err.status === 0) return `no Control Plane answered at ${url}`;
  if (err.status === 401) {
    return hasToken
      ? `the Control Plane at ${url} refused the token (401 unauthorized: the token this run sent is not its token)`
      : `the Control Plane at ${url} needs a token (401 unauthorized: set SVC_CONTROL_TOKEN or SVC_CONTROL_TOKEN_FILE)`;
  }
  return `the Control Plane at ${url} answered ${err.status} ${err.code} (${err.message})`;
}

interface RunBatch {
  state: RunState;
  offsets: ShipOffsets;
  events: unknown[];
  next: number;
  files: TreeFile[];
}

/** Told once per entry (a path under the run folder, or the folder itself) that it was left out, and why. */
export type SkipReport = (entry: string, reason: string) => void;

function offsetsPath(dir: string): string {
  return join(dir, 'ship.json');
}

/** A JSON object file of the run folder; null when missing, not an object, or not a plain file (then reported). */
function readObjectIn(folder: PlainDir, name: string, skip: SkipReport): Record<string, unknown> | null {
  const raw = readPlainIn(folder, name, MAX_STATE);
  if (typeof raw === 'string') {
    if (raw !== 'missing') skip(name, skipReason(raw, MAX_STATE));
    return null;
  }
  try {
    const value = JSON.parse(raw.toString('utf8')) as unknown;
    const isObject = value !== null && typeof value === 'object' && !Array.isArray(value);
    return isObject ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function readOffsets(folder: PlainDir, skip: SkipReport): ShipOffsets {
  const o = readObjectIn(folder, 'ship.json', skip) as Partial<ShipOffsets> | null;
  return { events_offset: Number(o?.events_offset) || 0, artifacts: o?.artifacts ?? {} };
}

/** Complete lines from `offset`, at most `max` events; returns the byte offset after the last one taken. */
function readEventLines(
  folder: PlainDir, offset: number, max: number, skip: SkipReport,
): { events: unknown[]; next: number } {
  const fd = openPlainFileIn(folder, 'events.jsonl');
  if (typeof fd === 'string') {
    if (fd !== 'missing') skip('events.jsonl', skipReason(fd));
    return { events: [], next: offset };
  }
  let buf: Buffer;
  try {
    const size = fstatSync(fd).size;
    if (size <= offset) return { events: [], next: offset };
    buf = readRange(fd, offset, Math.min(size - offset, 16 * 1024 * 1024));
  } finally {
    closeSync(fd);
  }
  const events: unknown[] = [];
  let pos = 0;
  while (events.length < max) {
    const nl = buf.indexOf(10, pos);
    if (nl === -1) break;
    const line = buf.subarray(pos, nl).toString('utf8');
    pos = nl + 1;
    if (!line.trim()) continue;
    try {
      events.push(JSON.parse(line));
    } catch {
      // A torn line is skipped rather than blocking every later event.
    }
  }
  return { events, next: offset + pos };
}

function readArtifacts(folder: PlainDir, skip: SkipReport): TreeFile[] {
  const dir = openPlainDirIn(folder, 'artifacts');
  if (typeof dir === 'string') {
    if (dir !== 'missing') skip('artifacts', skipReason(dir));
    return [];
  }
  try {
    // Files over the cap were always left out; they are reported now too.
    const files = readPlainTree(dir, {
      maxFile: MAX_ARTIFACT, maxDepth: MAX_ARTIFACT_DEPTH, skip: (rel, why) => skip(`artifacts/${rel}`, why),
    });
    return files.filter(({ rel }) => !rel.endsWith('.tmp'));
  } finally {
    dir.close();
  }
}

export function contentTypeOf(path: string): string {
  const ext = extname(path).toLowerCase();
  if (ext === '.json') return 'application/json';
  if (['.log', '.txt', '.patch', '.diff', '.md'].includes(ext)) return 'text/plain; charset=utf-8';
  return 'application/octet-stream';
}

/** A Control Plane on this machine (a loopback URL) may learn the run's folder; a remote one never does. */
function isLoopbackUrl(url: string): boolean {
  try {
    const host = new URL(url).hostname;
    return host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
  } catch {
    return false;
  }
}

export function createShipper(
  dir: string, env: NodeJS.ProcessEnv, onControl?: (item: ControlItem) => void, onSkip?: SkipReport,
): Shipper {
  const { url } = discoverControlUrl(env);
  const token = readControlToken(env);
  const client: ControlClient = createControlClient({ url, ...(token ? { token } : {}), timeoutMs: 10_000 });
  const sameMachine = isLoopbackUrl(url);
  const reported = new Set<string>();
  const skip: SkipReport = (entry, reason) => {
    if (reported.has(entry)) return;
    reported.add(entry);
    onSkip?.(entry, reason);
  };

  /** What one batch holds, read from the run folder without following a link; null when there is no run to ship. */
  function readBatch(): RunBatch | null {
    const folder = openRunFolder(dir);
    if ('failed' in folder) {
      if (folder.kind !== 'missing') skip(folder.failed, skipReason(folder.kind));
      return null;
    }
    try {
      const state = readObjectIn(folder, 'state.json', skip);
      if (!state) return null;
      // The folder names the run: a state.json claiming another run (edited by whoever can write the project) would
      // otherwise overwrite that run's row with this folder's story.
      if (state.run !== basename(dir)) {
        skip('state.json', `names run "${String(state.run)}", not "${basename(dir)}"`);
        return null;
      }
      const offsets = readOffsets(folder, skip);
      const { events, next } = readEventLines(folder, offsets.events_offset, EVENTS_PER_BATCH, skip);
      return { state: state as unknown as RunState, offsets, events, next, files: readArtifacts(folder, skip) };
    } finally {
      folder.close();
    }
  }

  async function flushOnce(): Promise<{ ok: boolean; more: boolean }> {
    const read = readBatch();
    if (!read) return { ok: true, more: false };
    const { state, offsets, events, next } = read;
    const artifacts: Array<{ run: string; path: string; content_type: string; content_base64: string }> = [];
    const shippedNow: Record<string, string> = {};
    let bytes = 0;
    for (const { rel, content } of read.files) {
      const sha = createHash('sha256').update(content).digest('hex');
      if (offsets.artifacts[rel] === sha) continue;
      if (bytes + content.length > ARTIFACT_BYTES_PER_BATCH && artifacts.length > 0) break;
      bytes += content.length;
      artifacts.push({
        run: state.run, path: rel, content_type: contentTypeOf(rel), content_base64: content.toString('base64'),
      });
      shippedNow[rel] = sha;
    }
    const { source: _source, ...run } = toRunJson(state);
    const result = await client.ingest({
      source: state.source,
      // The run JSON, plus the run's folder for a Control Plane on this machine: it keeps that only when the folder
      // is a project its operator registered (then Retry and Verify work there), never a pid
      // (src/control/handlers/ingest.ts).
      runs: [sameMachine ? { ...run, repo_path: state.repo_path } : run],
      events: events.map((e) => ({ ...(e as object), run: state.run })) as never,
      artifacts,
    });
    writeJsonAtomic(offsetsPath(dir), { events_offset: next, artifacts: { ...offsets.artifacts, ...shippedNow } });
    for (const item of result.control ?? []) onControl?.(item);
    const artifactsFull = artifacts.length > 0 && bytes >= ARTIFACT_BYTES_PER_BATCH;
    return { ok: true, more: events.length === EVENTS_PER_BATCH || artifactsFull };
  }

  let failure: string | null = null;
  return {
    url,
    failure: () => failure,
    async flush() {
      try {
        for (let i = 0; i < 1000; i++) {
          const { more } = await flushOnce();
          if (!more) break;
        }
        failure = null;
        return true;
      } catch (err) {
        failure = failureOf(err, url, token !== undefined && token !== '');
        return false;
      }
    },
  };
}
