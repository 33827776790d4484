// POST /v1/import: registers the project (src/control/projects.ts) and reads <project>/.svc/runs/*/{state.json,
// events.jsonl,artifacts/**} through the same validation and transaction as ingest, one run per transaction.
// Symlinks are never followed out of the runs folder.
import { lstat, readdir, readFile, realpath } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { HttpError } from '../http/http-error.ts';
import type { ControlDeps } from './deps.ts';
import { SEGMENT } from './params.ts';
import { contentTypeFor } from './content-type.ts';
import { validateEvent, validateRun, type ArtifactUpload, type IngestBatch } from './ingest-validate.ts';
import { applyBatch } from './ingest-apply.ts';

const MAX_ARTIFACT = 16 * 1024 * 1024;
const MAX_SKIPPED = 100;

export interface ImportResult {
  runs: number;
  events: number;
  duplicates: number;
  artifacts: number;
  skipped: Array<{ entry: string; reason: string }>;
}

async function isDir(path: string): Promise<boolean> {
  const st = await lstat(path).catch(() => null);
  return st !== null && st.isDirectory();
}

async function readArtifacts(root: string, run: string, prefix = '', out: ArtifactUpload[] = [], skip: (e: string, r: string) => void): Promise<ArtifactUpload[]> {
  const dir = join(root, prefix);
  for (const name of (await readdir(dir).catch(() => [])).sort()) {
    const rel = prefix ? `${prefix}/${name}` : name;
    const st = await lstat(join(root, rel));
    if (st.isDirectory()) await readArtifacts(root, run, rel, out, skip);
    else if (!st.isFile()) skip(`${run}/artifacts/${rel}`, 'not a regular file');
    else if (st.size > MAX_ARTIFACT) skip(`${run}/artifacts/${rel}`, 'larger than 16 MiB');
    else if (name.includes('\\')) skip(`${run}/artifacts/${rel}`, 'name contains a backslash');
    else out.push({ run, path: rel, content_type: contentTypeFor(name), content: await readFile(join(root, rel)) });
  }
  return out;
}

async function readRun(deps: ControlDeps, project: string, dir: string, skip: (e: string, r: string) => void): Promise<IngestBatch | null> {
  const base = join(project, '.svc', 'runs', dir);
  let state: Record<string, unknown>;
  try {
    state = JSON.parse(await readFile(join(base, 'state.json'), 'utf8')) as Record<string, unknown>;
    if (state === null || typeof state !== 'object' || Array.isArray(state)) throw new Error('not an object');
  } catch {
    skip(dir, 'state.json is missing or not a JSON object');
    return null;
  }
  const source = typeof state.source === 'string' && SEGMENT.test(state.source) ? state.source : deps.settings.source;
  const now = deps.clock();
  let run;
  try {
    // The folder the operator named wins over anything state.json claims; a recorded pid is never taken from a file.
    run = validateRun({ ...state, repo_path: project, pid: null, source, run: state.run ?? dir }, `${dir}/state.json`, source, now);
  } catch (err) {
    skip(dir, err instanceof Error ? err.message : 'invalid state.json');
    return null;
  }
  const events = [];
  const lines = (await readFile(join(base, 'events.jsonl'), 'utf8').catch(() => '')).split('\n');
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
  const artifacts = await readArtifacts(join(base, 'artifacts'), run.run, '', [], skip);
  return { source, runs: [run], events, artifacts, notifications: [] };
}

export async function importProject(deps: ControlDeps, path: unknown): Promise<ImportResult> {
  if (typeof path !== 'string' || !isAbsolute(path) || path.includes('\0')) {
    throw new HttpError('invalid_param', 'Field "path" must be an absolute path');
  }
  if (!(await isDir(path))) throw new HttpError('invalid_param', 'Field "path" is not a directory');
  const runsDir = join(path, '.svc', 'runs');
  const hasRuns = await isDir(runsDir);
  // A repository with no runs yet is imported to register it, so runs may be started there (issue 20 item 6).
  if (!hasRuns && !(await lstat(join(path, '.git')).catch(() => null))) {
    throw new HttpError('invalid_param', 'Field "path" is neither a git repository nor a folder with .svc/runs');
  }
  // Importing is how the operator registers a project: /v1/start, retry, resume and verify run only in registered ones.
  deps.stores.projects.add(await realpath(path), deps.clock());
  const result: ImportResult = { runs: 0, events: 0, duplicates: 0, artifacts: 0, skipped: [] };
  if (!hasRuns) return result;
  const skip = (entry: string, reason: string): void => {
    if (result.skipped.length < MAX_SKIPPED) result.skipped.push({ entry, reason });
  };
  for (const dir of (await readdir(runsDir)).sort()) {
    if (!SEGMENT.test(dir) || !(await isDir(join(runsDir, dir)))) continue;
    const batch = await readRun(deps, path, dir, skip);
    if (!batch) continue;
    // An explicit import brings back a run that was deleted (ingest does not: deleted-runs-store.ts).
    for (const r of batch.runs) deps.stores.deletedRuns.forget(batch.source, r.run);
    // Control requests belong to the runner's next ingest, not to an import.
    const applied = applyBatch(deps, batch, { deliverControl: false });
    result.runs += applied.runs;
    result.events += applied.events;
    result.duplicates += applied.duplicates;
    result.artifacts += applied.artifacts;
  }
  return result;
}
