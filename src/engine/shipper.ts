// Sends a run's state, events and artifacts to the Control Plane (POST /v1/ingest), batched and resumable from ship.json.
// A Control Plane that is down never fails a run: flush() reports false and the caller tries again later (or `svc ship`).
import { readFileSync, existsSync, readdirSync, statSync, openSync, readSync, closeSync } from 'node:fs';
import { join, relative, extname } from 'node:path';
import { createHash } from 'node:crypto';
import { createControlClient, type ControlClient } from '../client/client.ts';
import { discoverControlUrl } from '../client/discover.ts';
import { writeJsonAtomic } from './atomic.ts';
import { artifactsDir, eventsPath } from './paths.ts';
import { tryReadState, toRunJson } from './run-state.ts';
import { readControlToken } from './control-token.ts';

export const EVENTS_PER_BATCH = 500;
const ARTIFACT_BYTES_PER_BATCH = 8 * 1024 * 1024;
const MAX_ARTIFACT = 8 * 1024 * 1024;

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
}

function offsetsPath(dir: string): string {
  return join(dir, 'ship.json');
}

function readOffsets(dir: string): ShipOffsets {
  try {
    const o = JSON.parse(readFileSync(offsetsPath(dir), 'utf8')) as Partial<ShipOffsets>;
    return { events_offset: Number(o.events_offset) || 0, artifacts: o.artifacts ?? {} };
  } catch {
    return { events_offset: 0, artifacts: {} };
  }
}

/** Complete lines from `offset`, at most `max` events; returns the byte offset after the last one taken. */
function readEventLines(dir: string, offset: number, max: number): { events: unknown[]; next: number } {
  const path = eventsPath(dir);
  if (!existsSync(path)) return { events: [], next: offset };
  const size = statSync(path).size;
  if (size <= offset) return { events: [], next: offset };
  const fd = openSync(path, 'r');
  const buf = Buffer.alloc(Math.min(size - offset, 16 * 1024 * 1024));
  try {
    readSync(fd, buf, 0, buf.length, offset);
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

function walk(dir: string, out: string[] = []): string[] {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) walk(full, out);
    else out.push(full);
  }
  return out;
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

export function createShipper(dir: string, env: NodeJS.ProcessEnv, onControl?: (item: ControlItem) => void): Shipper {
  const { url } = discoverControlUrl(env);
  const token = readControlToken(env);
  const client: ControlClient = createControlClient({ url, ...(token ? { token } : {}), timeoutMs: 10_000 });
  const sameMachine = isLoopbackUrl(url);

  async function flushOnce(): Promise<{ ok: boolean; more: boolean }> {
    const state = tryReadState(dir);
    if (!state) return { ok: true, more: false };
    const offsets = readOffsets(dir);
    const { events, next } = readEventLines(dir, offsets.events_offset, EVENTS_PER_BATCH);
    const artifacts: Array<{ run: string; path: string; content_type: string; content_base64: string }> = [];
    const shippedNow: Record<string, string> = {};
    let bytes = 0;
    for (const file of walk(artifactsDir(dir))) {
      const rel = relative(artifactsDir(dir), file).split('\\').join('/');
      if (rel.endsWith('.tmp')) continue;
      const content = readFileSync(file);
      if (content.length > MAX_ARTIFACT) continue;
      const sha = createHash('sha256').update(content).digest('hex');
      if (offsets.artifacts[rel] === sha) continue;
      if (bytes + content.length > ARTIFACT_BYTES_PER_BATCH && artifacts.length > 0) break;
      bytes += content.length;
      artifacts.push({ run: state.run, path: rel, content_type: contentTypeOf(rel), content_base64: content.toString('base64') });
      shippedNow[rel] = sha;
    }
    const { source: _source, ...run } = toRunJson(state);
    const result = await client.ingest({
      source: state.source,
      // The run JSON, plus the run's folder for a Control Plane on this machine: it keeps that only when the folder is
      // a project its operator registered (then Retry and Verify work there), never a pid (src/control/handlers/ingest.ts).
      runs: [sameMachine ? { ...run, repo_path: state.repo_path } : run],
      events: events.map((e) => ({ ...(e as object), run: state.run })) as never,
      artifacts,
    });
    writeJsonAtomic(offsetsPath(dir), { events_offset: next, artifacts: { ...offsets.artifacts, ...shippedNow } });
    for (const item of result.control ?? []) onControl?.(item);
    return { ok: true, more: events.length === EVENTS_PER_BATCH || (artifacts.length > 0 && bytes >= ARTIFACT_BYTES_PER_BATCH) };
  }

  return {
    url,
    async flush() {
      try {
        for (let i = 0; i < 1000; i++) {
          const { more } = await flushOnce();
          if (!more) return true;
        }
        return true;
      } catch {
        return false;
      }
    },
  };
}
