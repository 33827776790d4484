// POST /v1/import: registers the project (src/control/projects.ts) and reads <project>/.svc/runs/*/{state.json,
// events.jsonl,artifacts/**} and stores them through the same validation as ingest, all in ONE transaction: a failed
// import changes nothing (no project registered without its runs). No symbolic link is ever followed below the project
// folder (src/engine/plain-tree.ts): a linked .svc, runs folder, run folder, state.json, events.jsonl, artifacts/,
// artifact subfolder or file is skipped and listed, so a project cannot make the Control Plane serve ~/.svc/keys.
import { lstatSync, realpathSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { HttpError } from '../http/http-error.ts';
import type { ControlDeps } from './deps.ts';
import { SEGMENT } from './params.ts';
import { contentTypeFor } from './content-type.ts';
import { validateEvent, validateRun, type IngestBatch } from './ingest-validate.ts';
import { storeBatch } from './ingest-apply.ts';
import { transaction } from '../db/open.ts';
import type { EventRow } from '../db/events-store.ts';
import {
  listPlain, openPlainDirIn, openPlainPath, readPlainIn, readPlainTree, skipReason, type PlainDir,
} from '../engine/plain-tree.ts';

const MAX_ARTIFACT = 16 * 1024 * 1024;
const MAX_STATE = 1024 * 1024;
// A bound on what one file may make the server hold in memory; a longer events.jsonl is skipped and listed.
const MAX_EVENTS_FILE = 256 * 1024 * 1024;
const MAX_ARTIFACT_DEPTH = 16;
const MAX_SKIPPED = 100;

export interface ImportResult {
  runs: number;
  events: number;
  duplicates: number;
  artifacts: number;
  skipped: Array<{ entry: string; reason: string }>;
}

type Skip = (entry: string, reason: string) => void;

function readState(run: PlainDir, dir: string, skip: Skip): Record<string, unknown> | null {
  const raw = readPlainIn(run, 'state.json', MAX_STATE);
  if (typeof raw === 'string') {
    skip(`${dir}/state.json`, skipReason(raw, MAX_STATE));
    return null;
  }
  try {
    const state = JSON.parse(raw.toString('utf8')) as unknown;
    if (state !== null && typeof state === 'object' && !Array.isArray(state)) return state as Record<string, unknown>;
  } catch {
    // reported below
  }
  skip(dir, 'state.json is not a JSON object');
  return null;
}

function readEventsText(run: PlainDir, dir: string, skip: Skip): string {
  const raw = readPlainIn(run, 'events.jsonl', MAX_EVENTS_FILE);
  if (raw === 'missing') return '';
  if (typeof raw === 'string') {
    skip(`${dir}/events.jsonl`, skipReason(raw, MAX_EVENTS_FILE));
    return '';
  }
  return raw.toString('utf8');
}

function readRun(deps: ControlDeps, project: string, runs: PlainDir, dir: string, skip: Skip): IngestBatch | null {
  const folder = openPlainDirIn(runs, dir);
  if (typeof folder === 'string') {
    if (folder !== 'file') skip(dir, skipReason(folder));
    return null;
  }
  try {
    const state = readState(folder, dir, skip);
    if (!state) return null;
    const source = typeof state.source === 'string' && SEGMENT.test(state.source) ? state.source : deps.settings.source;
    const now = deps.clock();
    let run;
    try {
      // The folder the operator named wins over anything state.json claims; a recorded pid is never taken from a file.
      const claimed = { ...state, repo_path: project, pid: null, source, run: state.run ?? dir };
      run = validateRun(claimed, `${dir}/state.json`, source, now);
    } catch (err) {
      skip(dir, err instanceof Error ? err.message : 'invalid state.json');
      return null;
    }
    const events = [];
    const lines = readEventsText(folder, dir, skip).split('\n');
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!.trim();
      if (!line) continue;
      try {
        const ev = JSON.parse(line) as Record<string, unknown>;
        events.push(validateEvent({ ...ev, source, run: run.run }, `${dir}/events.jsonl:${i + 1}`, source, now));
      } catch (err) {
        // A half-written last line is normal while a run is still going; report and move on.
        skip(`${dir}/events.jsonl:${i + 1}`, err instanceof HttpError ? err.message : 'not valid JSON');
      }
    }
    return { source, runs: [run], events, artifacts: readArtifacts(folder, dir, run.run, skip), notifications: [],
      served_repos: null };
  } finally {
    folder.close();
  }
}

function readArtifacts(folder: PlainDir, dir: string, run: string, skip: Skip): IngestBatch['artifacts'] {
  const artifacts = openPlainDirIn(folder, 'artifacts');
  if (typeof artifacts === 'string') {
    if (artifacts !== 'missing') skip(`${dir}/artifacts`, skipReason(artifacts));
    return [];
  }
  try {
    const files = readPlainTree(artifacts, {
      maxFile: MAX_ARTIFACT,
      maxDepth: MAX_ARTIFACT_DEPTH,
      skip: (rel, reason) => skip(`${dir}/artifacts/${rel}`, reason),
    });
    return files.flatMap(({ rel, content }) => {
      if (!rel.includes('\\')) return [{ run, path: rel, content_type: contentTypeFor(rel), content }];
      skip(`${dir}/artifacts/${rel}`, 'name contains a backslash');
      return [];
    });
  } finally {
    artifacts.close();
  }
}

export async function importProject(deps: ControlDeps, path: unknown): Promise<ImportResult> {
  if (typeof path !== 'string' || !isAbsolute(path) || path.includes('\0')) {
    throw new HttpError('invalid_param', 'Field "path" must be an absolute path');
  }
  // The folder the operator named must itself be a folder, not a link; from there down nothing is followed.
  const project = openPlainPath(path, []);
  if ('failed' in project) throw new HttpError('invalid_param', 'Field "path" is not a directory');
  project.close();
  const runs = openPlainPath(path, ['.svc', 'runs']);
  const isRepo = (() => {
    try {
      return lstatSync(join(path, '.git')) !== null;
    } catch {
      return false;
    }
  })();
  if ('failed' in runs && (runs.kind === 'link' || !isRepo)) {
    // A repository with no runs yet is imported to register it, so runs may be started there.
    const why = runs.kind === 'link' ? ` (${runs.failed} ${skipReason('link')})` : '';
    throw new HttpError('invalid_param', `Field "path" is neither a git repository nor a folder with .svc/runs${why}`);
  }
  const result: ImportResult = { runs: 0, events: 0, duplicates: 0, artifacts: 0, skipped: [] };
  const skip: Skip = (entry, reason) => {
    if (result.skipped.length < MAX_SKIPPED) result.skipped.push({ entry, reason });
  };
  const inserted: EventRow[] = [];
  try {
    // Read and stored in one transaction (reads are synchronous, nothing awaits inside): all of it or nothing.
    transaction(deps.db, () => {
      // Importing is how the operator registers a project: /v1/start, retry, resume and verify run only in registered
      // ones.
      deps.stores.projects.add(realpathSync(path), deps.clock());
      if ('failed' in runs) return;
      for (const { name } of listPlain(runs)) {
        if (!SEGMENT.test(name)) continue;
        const batch = readRun(deps, path, runs, name, skip);
        if (!batch) continue;
        // An explicit import brings back a run that was deleted (ingest does not: deleted-runs-store.ts).
        for (const r of batch.runs) deps.stores.deletedRuns.forget(batch.source, r.run);
        // Control requests belong to the runner's next ingest, not to an import.
        const stored = storeBatch(deps, batch, { deliverControl: false });
        for (const row of stored.inserted) inserted.push(row);
        result.runs += stored.result.runs;
        result.events += stored.result.events;
        result.duplicates += stored.result.duplicates;
        result.artifacts += stored.result.artifacts;
      }
    });
  } finally {
    if (!('failed' in runs)) runs.close();
  }
  deps.bus.publish(inserted);
  return result;
}
