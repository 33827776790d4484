// POST /v1/ingest (the shipper's batches) and POST /v1/import (a project's .svc/runs read from disk as the shipper
// reads them, through ingest's validation and store, in one transaction, following no symbolic link below the folder:
// docs/control-data.md).
import { lstatSync, realpathSync } from 'node:fs';
import { setImmediate } from 'node:timers/promises';
import { isAbsolute, join } from 'node:path';
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { RunnerCredential } from '../../http/guards.ts';
import { json } from '../../http/respond.ts';
import { contentTypeOf, OCTET_STREAM } from '../../http/static-files.ts';
import { transaction, untilWritten } from '../../db/open.ts';
import type { EventRow } from '../../db/events-store.ts';
import type { ControlDeps } from '../deps.ts';
import { bodyFields, invalidParam } from '../params.ts';
import { validateBatch, type IngestBatch } from '../ingest-validate.ts';
import {
  isArtifactPath, isSignerKind, runContainerData, SIGNER_ARTIFACTS, signerFields, validateEvent, validateRun,
} from '../../engine/run-event.ts';
import { isBoundKey, storeBatch } from '../ingest-apply.ts';
import { redactSecrets } from '../../engine/text.ts';
import type { IngestResult } from '../../client/types.ts';
import { isRegisteredProject } from '../action-rules.ts';
import { listPlain, openPlainDirIn, openPlainPath, readPlainIn, skipReason } from '../../engine/plain-tree.ts';
import {
  IMPORT_LINE_BYTES, readBindableRunKey, readRunBatch, type RunBatch, type ShipOffsets,
} from '../../engine/run-batch.ts';
import { realOrNull } from '../../spawn/tree.ts';
import { isValidSegment } from '../../engine/ids.ts';
import { runWorktreeHolding } from '../../engine/paths.ts';
import { trackedNames, UntrackableError, type Committed } from '../../engine/run-state.ts';
import { ACTIVE_STATUSES } from '../../run-json.ts';
import { errorMessage } from '../../errors.ts';

/** One transaction (all or nothing), then the new events to live streams. `boundRuns`: ingest-apply.ts storeBatch. */
function applyBatch(deps: ControlDeps, batch: IngestBatch, boundRuns: boolean): IngestResult {
  const { result, inserted, started } = transaction(deps.db, () => storeBatch(deps, batch, { boundRuns }));
  deps.checkpoints.nudge();
  deps.bus.publish(inserted);
  deps.metrics.observeEvents(inserted, started);
  return result;
}

/** Whether a run stored for the folder `held` is another project's than `path`'s (compared by real path). */
function isHeldElsewhere(held: string | null | undefined, path: string): boolean {
  if (!held || held === path) return false;
  return realOrNull(held) !== realOrNull(path);
}

/**
 * Keeps a batch's repo_path, which steers local actions, only for this server's own source under its own token, in a
 * registered project, and never over the folder a run is held for (a sticky column: the stored one stays). Refuses a
 * batch that names, for a run held for one project, another existing registered project, before anything of it is
 * applied, as import skips it (docs/control-data.md, "Which runs the Control Plane steers itself"). Any other folder
 * named (a project's old place after a move, a folder gone or never registered, none) is no claim to the run: the
 * batch is taken. The run's key, where one is bound, is what tells its own runner from another sender
 * (ingest-apply.ts checkRunKey).
 */
function takeRepoPaths(deps: ControlDeps, batch: IngestBatch, runner: RunnerCredential | undefined): void {
  for (const run of batch.runs) {
    const sent = run.repo_path;
    delete run.repo_path;
    // A runner token, even one named for this server's own source (a pod's agent can read its token), ships runs: it
    // never says where this server acts.
    if (!sent || runner !== undefined || batch.source !== deps.settings.source) continue;
    if (!isRegisteredProject(deps, sent)) continue;
    const held = deps.stores.runs.get(batch.source, run.run)?.repo_path;
    if (isHeldElsewhere(held, sent)) {
      throw new HttpError('forbidden_run', `Run ${batch.source}/${run.run} is a run of another project than the one ` +
        'this batch names for it (nothing of the batch was applied)');
    }
    if (!held) run.repo_path = sent;
  }
}

/**
 * A `bound-runs` batch (a pod's run container's, whose agent can read its token) as the agent's word: refused whole,
 * 403 `forbidden_run` naming the first field, when it says what only the pod's signer says (run-event.ts
 * signerFields, isSignerKind, SIGNER_ARTIFACTS); its lines marked as runContainerData says. What its rows keep
 * is run-event.ts runContainerRow, against the stored row (ingest-apply.ts storeBatch; docs/control-data.md, "Only
 * the signer's word").
 */
function takeAgentWord(batch: IngestBatch): void {
  const refuse = (where: string): never => {
    throw new HttpError('forbidden_run', `${where} is for the run's signer to say, not this token (a pod's run ` +
      'container\'s; nothing of the batch was applied)');
  };
  batch.runs.forEach((run, i) => {
    const field = signerFields(run)[0];
    if (field !== undefined) refuse(`runs[${i}].${field}`);
  });
  batch.events.forEach((ev, i) => {
    if (isSignerKind(ev.kind)) refuse(`events[${i}].kind ${JSON.stringify(ev.kind)}`);
    const data: unknown = JSON.parse(ev.data);
    const kept = runContainerData(ev.kind, data);
    if (kept !== data) ev.data = JSON.stringify(kept);
  });
  batch.artifacts.forEach((a, i) => {
    if (SIGNER_ARTIFACTS.has(a.path)) refuse(`artifacts[${i}].path ${JSON.stringify(a.path)}`);
  });
}

export const ingestRuns: Handler<ControlDeps> = (ctx) => {
  const batch = validateBatch(ctx.body, ctx.deps.clock());
  const { deps, runner } = ctx;
  if (runner !== undefined && batch.source !== runner.source) {
    throw new HttpError('forbidden_source', `This token may only ship runs of source "${runner.source}"`);
  }
  // A pod's run container's token (`bound-runs`), which the pod's agent can read, writes its own run only: nothing
  // source-wide, and nothing only its signer says (takeAgentWord).
  const boundRuns = runner?.boundRuns === true;
  if (boundRuns && (batch.served_repos !== null || batch.notifications.length > 0)) {
    throw new HttpError('forbidden_source', 'This token may only write runs already stored and bound to the key its ' +
      'batch carries, not its source\'s served repositories or notifications (nothing of the batch was applied)');
  }
  if (boundRuns) takeAgentWord(batch);
  const named = new Set([...batch.runs, ...batch.events, ...batch.artifacts].map((item) => item.run));
  takeRepoPaths(deps, batch, runner);
  // A run the operator deleted stays deleted when its runner ships it again (named in "deleted").
  const deleted = new Set([...named].filter((run) => deps.stores.deletedRuns.has(batch.source, run)));
  if (deleted.size === 0) return json(200, applyBatch(deps, batch, boundRuns));
  const kept = {
    ...batch,
    runs: batch.runs.filter((r) => !deleted.has(r.run)),
    events: batch.events.filter((e) => !deleted.has(e.run)),
    artifacts: batch.artifacts.filter((a) => !deleted.has(a.run)),
  };
  return json(200, { ...applyBatch(deps, kept, boundRuns), deleted: [...deleted].sort() });
};

const MAX_SKIPPED = 100;

type Skip = (entry: string, reason: string) => void;

/** `key`: the folder's `run-key`, which binds a run stored without one (ingest-apply.ts storeBatch) and must be the
 * one a bound run has. */
function importBatch(
  deps: ControlDeps, project: string, read: RunBatch, firstLine: number, skip: Skip, key: string | null,
): IngestBatch | null {
  const { state } = read;
  const name = String(state.run);
  const source = isValidSegment(state.source) ? state.source : deps.settings.source;
  // Only this server's own runs import, and never over one it holds for another folder: a project's .svc/runs is the
  // project's text, and repo_path steers local actions and the merge policy (docs/control-data.md, Import).
  if (source !== deps.settings.source) {
    skip(name, `is a run of source ${JSON.stringify(source)}: only this server's own source ` +
      `(${JSON.stringify(deps.settings.source)}) imports`);
    return null;
  }
  const stored = deps.stores.runs.getKeyed(source, name);
  const held = stored?.repo_path;
  if (isHeldElsewhere(held, project)) {
    skip(name, `is already a run of another project (${JSON.stringify(held)})`);
    return null;
  }
  // A folder without the run's key is not where its runner made it: anyone can name a run (its id is public in the
  // PR branch svc/<run>) and write a folder for it (docs/control-data.md, Import).
  const bound = stored?.run_key_sha256;
  if (bound && !isBoundKey(bound, key)) {
    skip(name, 'is bound to another runner\'s key');
    return null;
  }
  const now = deps.clock();
  let run;
  try {
    // The folder the operator named wins over state.json.
    run = validateRun({ ...state, repo_path: project, source }, `${name}/state.json`, source, now);
  } catch (err) {
    skip(name, err instanceof Error ? err.message : 'invalid state.json');
    return null;
  }
  const events = read.lines.flatMap((line, i) => {
    const where = `${name}/events.jsonl:${firstLine + i + 1}`;
    try {
      return line.trim() ? [validateEvent({ ...JSON.parse(line), source, run: name }, where, source, now)] : [];
    } catch (err) {
      skip(where, err instanceof HttpError ? err.message : 'not valid JSON');
      return [];
    }
  });
  const artifacts = read.artifacts.flatMap(({ rel, content }) => {
    const type = contentTypeOf(rel) ?? OCTET_STREAM;
    if (isArtifactPath(rel)) return [{ run: name, path: rel, content_type: type, content }];
    skip(`${name}/artifacts/${redactSecrets(rel)}`,
      rel.includes('\\') ? 'name contains a backslash' : 'name ingest refuses');
    return [];
  });
  return { source, runs: [{ ...run, run_key: key, lease_until: null }], events, artifacts, notifications: [],
    served_repos: null };
}

/** `only`: the run folders to read (all when absent), of a project already registered (this registers none). */
function importProject(deps: ControlDeps, path: unknown, only?: ReadonlySet<string>) {
  if (typeof path !== 'string' || !isAbsolute(path) || path.includes('\0')) {
    invalidParam('Field "path" must be an absolute path');
  }
  // Its agent wrote a run's worktree, a .svc/runs there too (engine/paths.ts runWorktreeHolding).
  if (runWorktreeHolding(path) ?? runWorktreeHolding(realOrNull(path) ?? path)) {
    invalidParam('Field "path" is in svc\'s worktree of a run, which its agent wrote: import the project instead');
  }
  const project = openPlainPath(path, []);
  if ('failed' in project) invalidParam('Field "path" is not a directory');
  project.close();
  const runs = openPlainPath(path, ['.svc', 'runs']);
  const isRepo = lstatSync(join(path, '.git'), { throwIfNoEntry: false }) !== undefined;
  if ('failed' in runs && (runs.kind === 'link' || !isRepo)) {
    const why = runs.kind === 'link' ? ` (${runs.failed} ${skipReason('link')})` : '';
    invalidParam(`Field "path" is neither a git repository nor a folder with .svc/runs${why}`);
  }
  // Run folders git tracks are the repository's content, which whoever can push writes, not runs svc made here (the
  // engine refuses them too: run-state.ts refuseTrackedRun). Asked before the transaction, which git would hold open.
  // When git fails in the checkout, what it commits is unknown: every run folder is skipped with git's reason.
  let tracked: Committed = () => false;
  let untrackable: string | null = null;
  try {
    if (!('failed' in runs)) tracked = trackedNames(path, '.svc/runs');
  } catch (err) {
    if (!(err instanceof UntrackableError)) throw err;
    untrackable = err.message;
  }
  const skipped: Array<{ entry: string; reason: string }> = [];
  const result = { runs: 0, events: 0, duplicates: 0, artifacts: 0, skipped };
  const skip: Skip = (entry, reason) => {
    if (skipped.length < MAX_SKIPPED && !skipped.some((s) => s.entry === entry)) {
      skipped.push({ entry, reason });
    }
  };
  const inserted: EventRow[] = [];
  try {
    transaction(deps.db, () => {
      if (!only) deps.stores.projects.add(realpathSync(path), deps.clock());
      if ('failed' in runs) return;
      for (const { name } of listPlain(runs)) {
        if (!isValidSegment(name) || (only && !only.has(name))) continue;
        if (untrackable !== null || tracked(name)) {
          skip(name, untrackable ?? 'is committed to the repository: its content, not a run svc made here');
          continue;
        }
        const folder = openPlainDirIn(runs, name);
        if (typeof folder === 'string') {
          if (folder !== 'file') skip(name, skipReason(folder));
          continue;
        }
        try {
          // The folder's key binds a run stored without one, so later batches need it (docs/control-data.md, Import).
          const key = readBindableRunKey(folder, (entry, reason) => skip(`${name}/${entry}`, reason));
          // Read again at start-up (`only`), a run resumes after what its runner shipped (ship.json), as the
          // shipper does.
          let from: ShipOffsets | null = only ? null : { events_offset: 0, artifacts: {} };
          for (let line = 0, more = true, first = true; more; first = false) {
            const read = readRunBatch(folder, from, (entry, reason) => skip(`${name}/${entry}`, reason), false);
            for (const { index, bytes } of read?.tooLong ?? []) {
              const most = `${IMPORT_LINE_BYTES / 1024 / 1024} MiB`;
              skip(`${name}/events.jsonl:${line + index + 1}`,
                `left out: a line of ${bytes} bytes, more than an import takes (${most})`);
            }
            const batch = read && importBatch(deps, path, read, line, skip, key);
            // A folder without a state.json is said, as one with an unreadable state.json is (readRunBatch).
            if (!read && first && readPlainIn(folder, 'state.json', 0) === 'missing') {
              skip(`${name}/state.json`, skipReason('missing'));
            }
            if (!read || !batch) break;
            // An explicit import brings back a run of this server's source that was deleted (ingest does not:
            // control-stores.ts deletedRuns); importBatch refused any other source's.
            deps.stores.deletedRuns.forget(batch.source, name);
            const stored = storeBatch(deps, batch, { fromDisk: true });
            for (const row of stored.inserted) inserted.push(row);
            if (first) result.runs += stored.result.runs;
            for (const count of ['events', 'duplicates', 'artifacts'] as const) result[count] += stored.result[count];
            ({ next: from, more } = read);
            line += read.lines.length;
            // One batch carries the run's state (its end): the rest is the shipper's, on the next svc command there.
            if (only) break;
          }
        } finally {
          folder.close();
        }
      }
    });
  } finally {
    if (!('failed' in runs)) runs.close();
  }
  deps.bus.publish(inserted);
  return result;
}

/** Active runs read at once when looking for those that ended while no Control Plane listened. */
const ACTIVE_PAGE = 500;

/**
 * At start-up, the active runs of this server's source in registered projects, read again from their folders as an
 * import reads them (its checks and the ingest rules). A run that ended while no Control Plane listened (its worker's
 * last ship failed, leaving it to a later svc command in that project) is told its end here, else it stays active
 * and holds a `max_concurrent_runs` slot for ever.
 */
export async function importActiveRuns(deps: ControlDeps, stop?: AbortSignal): Promise<void> {
  const source = deps.settings.source;
  const byProject = new Map<string, Set<string>>();
  for (const status of ACTIVE_STATUSES) {
    for (const { repo_path: project, run } of deps.stores.runs.each({ status, source, limit: ACTIVE_PAGE })) {
      if (project !== null) byProject.set(project, (byProject.get(project) ?? new Set()).add(run));
    }
  }
  const shutdown = stop ?? new AbortController().signal;
  for (const [project, runs] of byProject) {
    // Between projects the server answers its requests (/health first): this runs after it listens.
    await setImmediate();
    // A database another process holds (or a full disk) takes the project later: it is read again in a second. A
    // server closing reads no more: what is left is read at its next start.
    const failed = (err: unknown): void =>
      deps.log.error('could not read active runs again', { project, error: errorMessage(err) });
    const read = await untilWritten(deps.db, () => {
      if (!isRegisteredProject(deps, project)) return;
      const { skipped } = importProject(deps, project, runs);
      if (skipped.length > 0) deps.log.warn('active runs not read again from their folders', { project, skipped });
    }, shutdown, failed).catch((err: unknown) => {
      failed(err); // not one the database may take later: this project is skipped
      return true;
    });
    if (!read) return;
  }
}

export const importRuns: Handler<ControlDeps> = (ctx) => {
  return json(200, importProject(ctx.deps, bodyFields(ctx.body, 'ImportRequest').path));
};
