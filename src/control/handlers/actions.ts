// Run actions (DESIGN §3, §4). A run whose folder this server recorded is steered on disk; any other gets a control
// request for its own next ingest (docs/architecture.md, "Channels").
import { controlStartArgs, resumeArgs, retryArgs } from '../../spawn/start.ts';
import { hash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { basename, dirname, isAbsolute, resolve } from 'node:path';
import { HttpError } from '../../http/http-error.ts';
import type { Handler, Ctx } from '../../http/pipeline.ts';
import { json } from '../../http/respond.ts';
import type { ControlDeps } from '../deps.ts';
import { bodyFields, invalidParam, runParams, storedRun } from '../params.ts';
import { runToJson } from '../../db/runs-store.ts';
import { runFailure } from '../../run-json.ts';
import { transaction } from '../../db/open.ts';
import { failureColumns, type RunInput, type RunRow } from '../../db/run-types.ts';
import { canonicalJson } from '../../canonical-json.ts';
import { newRunId, newRunKey } from '../../engine/ids.ts';
import { runKeyDigest } from '../ingest-apply.ts';
import { openRunFolder } from '../../engine/plain-tree.ts';
import { runDir } from '../../engine/paths.ts';
import { readBindableRunKey } from '../../engine/run-batch.ts';
import { refuseUnmarkedPlan } from '../../engine/plan-reuse.ts';
import { SvcError } from '../../errors.ts';
import { answerFilePath, writeAnswer, isOriginName, MAX_ANSWER_BYTES } from '../../engine/answers.ts';
import { writeFileAtomic } from '../../atomic-write.ts';
import { oneLine } from '../../one-line.ts';
import { readEffectiveConfig } from '../config-schema.ts';
import { actionRefusal, isNamedProject, isRegisteredProject, type RunAction } from '../action-rules.ts';
import { fileInside, isIssueUrl } from '../../engine/spec.ts';
import { realOrNull } from '../../spawn/tree.ts';
import { PROVIDER_NAME } from '../../engine/config.ts';
import { formatTraceparent, parseTraceparent } from '../../trace.ts';
import { actorOf, noteAudit } from '../audited.ts';

type C = Ctx<ControlDeps>;

const INPUTS = ['brief', 'spec_path', 'issue_url'] as const;
const MAX_INPUT_CHARS = 64 * 1024;

function unregisteredMessage(path: string): string {
  return `Project ${JSON.stringify(path)} is not registered with this Control Plane: ` +
    'import it first (POST /v1/import {"path": …}, or add it to the "repos" setting)';
}

/** `repo` is a registered project's folder or inside it, checked before git so much as reads the folder. */
function registeredRoot(deps: ControlDeps, repo: unknown): string {
  if (repo === undefined) invalidParam('"repo" is required: the absolute path of a registered project');
  if (typeof repo !== 'string' || !isAbsolute(repo) || repo.includes('\0')) {
    invalidParam('"repo" must be an absolute path');
  }
  let dir = realOrNull(repo);
  while (dir !== null && !isRegisteredProject(deps, dir)) dir = dirname(dir) === dir ? null : dirname(dir);
  // A registered folder that is not there (say one the "repos" setting names) is said as such, not as unregistered;
  // any other path is only unregistered, so the answer tells nothing of what exists on this host.
  if (dir === null && realOrNull(repo) === null && isNamedProject(deps, repo)) {
    invalidParam(`Project ${JSON.stringify(repo)} does not exist`);
  }
  if (dir === null) invalidParam(unregisteredMessage(repo));
  const root = deps.repos.rootOf(repo) ?? invalidParam('"repo" is not a git repository');
  // The repository itself, not only a folder above it: a repository nested inside a registered one is not registered.
  if (!isRegisteredProject(deps, root)) invalidParam(unregisteredMessage(root));
  return root;
}

function checkInput(kind: (typeof INPUTS)[number], value: string, root: string): string {
  if (kind === 'spec_path') {
    const path = resolve(root, value);
    // Inside the repository once links are resolved: the run is launched with SVC_ORIGIN=control, which the engine
    // does not confine (spec.ts classifyInput), and a committed TASK.md may link to ~/.ssh (OpenAPI: "inside the
    // repository").
    const inside = /\.(md|json)$/i.test(path) ? fileInside(path, root) : null;
    if (inside === null) invalidParam('"spec_path" must name an existing .md spec or .json export');
    return inside;
  }
  if (kind === 'issue_url' && !isIssueUrl(value)) {
    invalidParam('"issue_url" must be an error-tracker issue URL (…/issues/<id>)');
  }
  return value.trim();
}

/** The body of POST /v1/start, read and checked (DESIGN §3). */
function parseStart(deps: ControlDeps, body: unknown) {
  const b = bodyFields(body, 'StartRequest');
  const given = INPUTS.filter((k) => b[k] !== undefined);
  if (given.length !== 1) invalidParam('Give exactly one of "brief", "spec_path" or "issue_url"');
  const kind = given[0]!;
  const value = b[kind];
  if (typeof value !== 'string' || value.trim() === '' || value.length > MAX_INPUT_CHARS) {
    invalidParam(`"${kind}" must be a non-empty string`);
  }
  const root = registeredRoot(deps, b.repo);
  const input = { kind, value: checkInput(kind, value, root) };
  const { provider, pr, request_id: requestId } = b;
  if (provider !== undefined && (typeof provider !== 'string' || !PROVIDER_NAME.test(provider))) {
    invalidParam('"provider" must be a provider name');
  }
  if (pr !== undefined && typeof pr !== 'boolean') invalidParam('"pr" must be true or false');
  if (requestId !== undefined && (typeof requestId !== 'string' || !/^[A-Za-z0-9._:-]{1,128}$/.test(requestId))) {
    invalidParam('"request_id" must be 1-128 letters, digits, ".", "_", ":" or "-"');
  }
  return { input, repo: root, provider: (provider as string | undefined) ?? null, pr: pr === true,
    requestId: (requestId as string | undefined) ?? null };
}

// A run takes minutes, but a slot may free up sooner.
const RETRY_AFTER_SECONDS = 30;

function checkConcurrency(deps: ControlDeps): void {
  const limit = readEffectiveConfig(deps.stores.config).config.max_concurrent_runs as number;
  const active = deps.stores.runs.countActive(deps.settings.source);
  if (active < limit) return;
  throw new HttpError(
    'too_many_requests',
    `${active} runs are queued, running, blocked or stopping (max_concurrent_runs is ${limit}); ` +
      'try again when one ends',
    { 'retry-after': String(RETRY_AFTER_SECONDS) },
  );
}

/**
 * Stores a run this server starts, queued and bound from birth to the key it returns, which only the run's launcher
 * is handed (docs/control-data.md, "Each run's own runner"); within the caller's transaction, if any.
 */
function queueRun(
  deps: ControlDeps, source: string, now: number, fields: Omit<RunInput, 'status' | 'started_at' | 'updated_at'>,
): string {
  const key = newRunKey();
  transaction(deps.db, () => {
    deps.stores.runs.upsert(source, { ...fields, status: 'queued', started_at: now, updated_at: now });
    deps.stores.runs.bindKey(source, fields.run, runKeyDigest(key));
  });
  return key;
}

export const startRun: Handler<ControlDeps> = (ctx) => {
  const { deps } = ctx;
  const s = parseStart(deps, ctx.body);
  // Always one the run has: a built-in, or one of the `providers` its launcher is handed (run-controller.ts).
  s.provider ??= (readEffectiveConfig(deps.stores.config).config.default_provider as string | null) ?? null;
  const source = deps.settings.source;
  const bodyHash = hash('sha256', canonicalJson(ctx.body), 'hex');
  const now = deps.clock();
  const run = newRunId(now);
  // The run a replayed request_id gets back, else the new run's key.
  const outcome = transaction(deps.db, (): RunRow | string => {
    if (s.requestId) {
      const seen = deps.stores.startRequests.get(s.requestId);
      // A seen id whose run was deleted since is a new request.
      const existing = seen ? deps.stores.runs.get(seen.source, seen.run) : undefined;
      if (seen && existing) {
        if (seen.body_sha256 !== bodyHash) {
          throw new HttpError('conflict', `request_id "${s.requestId}" was already used with a different body`);
        }
        return existing;
      }
      if (seen) deps.stores.startRequests.remove(s.requestId);
    }
    // After a replayed request_id got its run back: a replay never counts as a new start.
    checkConcurrency(deps);
    if (s.requestId) {
      deps.stores.startRequests.add({ request_id: s.requestId, body_sha256: bodyHash, source, run, created_at: now });
    }
    const brief = s.input.kind === 'spec_path' ? basename(s.input.value) : oneLine(s.input.value, 1500);
    return queueRun(deps, source, now, {
      run, group_id: run, repo: deps.repos.nameOf(s.repo), repo_path: s.repo,
      brief, origin: 'control', provider: s.provider, branch: s.pr ? `svc/${run}` : null,
    });
  });
  if (typeof outcome !== 'string') return json(200, runToJson(outcome));
  const args = controlStartArgs({
    repo: s.repo, run, pr: s.pr, provider: s.provider, brief: s.input.kind === 'brief', input: s.input.value,
  });
  const parent = parseTraceparent(ctx.req.headers.traceparent);
  deps.engine.launch(source, run, args, 'fail-run', { traceparent: parent ? formatTraceparent(parent) : undefined,
    runKey: outcome });
  return accepted(deps, source, run);
};

function accepted(deps: ControlDeps, source: string, run: string) {
  return json(202, runToJson(deps.stores.runs.get(source, run)!));
}

/** The run in the path, once ../action-rules.ts allows `action` on it (else its 409). */
function allowedRun(ctx: C, action: RunAction): RunRow {
  const row = storedRun(ctx.deps.stores.runs, runParams(ctx));
  const refusal = actionRefusal(ctx.deps, row, action);
  if (refusal !== null) throw new HttpError('invalid_transition', refusal);
  return row;
}

/** Refuses (409 conflict), before anything changes, a run whose folder holds a plan svc on this host did not write:
 * its launcher would refuse it too (plan-reuse.ts readPlan), after this server had set it running. */
function refuseUnmarked(ctx: C, row: RunRow): void {
  if (!reachable(ctx, row)) return;
  try {
    refuseUnmarkedPlan(runDir(row.repo_path!, row.run), ctx.deps.env);
  } catch (err) {
    if (err instanceof SvcError) throw new HttpError('conflict', err.message);
    throw err;
  }
}

/** A run of this server's source whose folder it recorded. */
function reachable(ctx: C, row: RunRow): boolean {
  return row.source === ctx.deps.settings.source && row.repo_path !== null;
}

export const stopRun: Handler<ControlDeps> = (ctx) => {
  const { deps } = ctx;
  const row = allowedRun(ctx, 'stop');
  const local = reachable(ctx, row);
  if (row.status === 'stopping') {
    // Asked again, a local stop looks again: the one asked first may have been lost with the Control Plane that took
    // it, and its run have ended unseen or gone on (a remote run's stop is a request its runner still takes).
    if (local) void deps.engine.stop(row, true);
    return json(202, runToJson(row));
  }
  const now = deps.clock();
  // A remote run bound to a key that no runner has shipped yet (queued, no status event: a pod's seal step stored it;
  // a runner's own first batch carries its events) may never get a runner: its pod can fail before the run
  // container's first batch, and nothing else ends the row. It ends `stopped` at once; a runner that still comes
  // takes the stop with its first batch.
  const unshipped = !local && row.status === 'queued' &&
    (deps.stores.runs.getKeyed(row.source, row.run)?.run_key_sha256 ?? null) !== null &&
    deps.stores.events.latest(row.source, row.run, 'run.status') === undefined;
  const to = unshipped ? 'stopped' : 'stopping';
  const failure = runFailure('stopped', 'stopped before any runner shipped it');
  const ended = unshipped ? { ended_at: now, ...failureColumns(failure) } : {};
  const event = { kind: 'run.status', data: { from: row.status, to }, ts: now };
  // One transaction: a write refused part way leaves no `stopping` run whose runner was never asked (a stop asked
  // again of a stopping run asks nothing new of another source's runner).
  const appended = transaction(deps.db, () => {
    deps.stores.runs.setStatus(row.source, row.run, to, now, ended);
    const stored = deps.stores.events.append(row.source, row.run, event);
    if (!local) deps.stores.controlRequests.add(row.source, row.run, 'stop', null, now);
    return stored;
  });
  deps.bus.publish([appended]);
  if (local) void deps.engine.stop(row);
  return accepted(deps, row.source, row.run);
};

/**
 * Binds a run stored without a key (imported before imports bound keys, shipped first without one) to its folder's
 * `run-key` before this server launches a runner there, which ships with that key: from then on no other sender of its
 * source writes the run (docs/control-data.md, "Each run's own runner"). A bound run keeps its own key.
 */
function bindToFolderKey(deps: ControlDeps, row: RunRow): void {
  const folder = openRunFolder(runDir(row.repo_path!, row.run));
  if ('failed' in folder) return;
  try {
    const key = readBindableRunKey(folder, () => {});
    if (key !== null) deps.stores.runs.bindKey(row.source, row.run, runKeyDigest(key));
  } finally {
    folder.close();
  }
}

export const resumeRun: Handler<ControlDeps> = (ctx) => {
  const { deps } = ctx;
  const row = allowedRun(ctx, 'resume');
  refuseUnmarked(ctx, row);
  checkConcurrency(deps);
  bindToFolderKey(deps, row);
  const after = deps.stores.events.maxId();
  deps.stores.runs.setStatus(row.source, row.run, 'running', deps.clock(), { ended_at: null, error: null });
  deps.engine.launch(row.source, row.run, resumeArgs(row.run, row.repo_path!), 'fail-run', { resumed: { row, after } });
  return accepted(deps, row.source, row.run);
};

export const retryRun: Handler<ControlDeps> = (ctx) => {
  const { deps } = ctx;
  const row = allowedRun(ctx, 'retry');
  refuseUnmarked(ctx, row);
  const repo = row.repo_path!;
  checkConcurrency(deps);
  const now = deps.clock();
  const run = newRunId(now);
  const key = queueRun(deps, row.source, now, {
    run, group_id: row.group_id, repo: row.repo, repo_path: repo, brief: row.brief, origin: row.origin,
    provider: row.provider, branch: row.branch?.startsWith('svc/') ? `svc/${run}` : null,
  });
  deps.engine.launch(row.source, run, retryArgs(row.run, run, repo), 'fail-run', { runKey: key });
  return accepted(deps, row.source, run);
};

/** What the launcher finds is the run's own events, so the answer is the run as is. */
function launchOnRun(action: 'verify' | 'pr', flags: string[]): Handler<ControlDeps> {
  return (ctx) => {
    const row = allowedRun(ctx, action);
    refuseUnmarked(ctx, row);
    bindToFolderKey(ctx.deps, row);
    ctx.deps.engine.launch(row.source, row.run, ['start', ...flags, row.run, '--repo', row.repo_path!], 'event-only');
    return json(202, runToJson(row));
  };
}

export const verifyRun = launchOnRun('verify', ['--detach', '--verify']);

/** `svc start --open-pr` for a --pr run whose verified work could not be opened as a PR (docs/engine.md). */
export const openRunPr = launchOnRun('pr', ['--open-pr']);

/** The file's bytes, or null when there is none (the run may take its answer at any moment). */
function bytesOrNull(path: string): Buffer | null {
  try {
    return readFileSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Puts the answer file back as it was: the earlier answer, or none; the refused one never stays for the run. */
function putBackAnswer(path: string, previous: Buffer | null): void {
  try {
    if (previous !== null) {
      writeFileAtomic(path, previous, 0o600);
      return;
    }
  } catch {
    // No room to put the earlier answer back: the refused answer is removed all the same.
  }
  rmSync(path, { force: true });
}

export const answerRun: Handler<ControlDeps> = (ctx) => {
  const { deps } = ctx;
  const body = bodyFields(ctx.body, 'Answer');
  const { answer, origin } = body;
  if (typeof answer !== 'string' || answer.trim() === '' || Buffer.byteLength(answer) > MAX_ANSWER_BYTES) {
    invalidParam(`"answer" must be a non-empty string of at most ${MAX_ANSWER_BYTES} bytes`);
  }
  if (origin !== undefined && (typeof origin !== 'string' || !isOriginName(origin))) {
    invalidParam('"origin" must be 1 to 200 characters without control characters');
  }
  const row = allowedRun(ctx, 'answer');
  const now = deps.clock();
  // Who answered (docs/engine.md "Who may answer what"): only the caller's own answer may raise the daily caps.
  const by = origin === undefined ? `control:${actorOf(deps, ctx.peer, ctx.req)}` : `origin:${origin}`;
  noteAudit(ctx, { answered_by: by });
  const event = { kind: 'answer', data: { answer, via: 'control', by }, ts: now };
  // The event is written before the file the run takes: a database that refuses it (503) leaves the run without the
  // answer, and a file that cannot be written takes the event back with it.
  const path = answerFilePath(deps.settings.answerDir, row.source, row.run);
  let written = false;
  // An earlier answer the run has not taken yet (its event stands) is overwritten: its bytes are kept to put back.
  let previous: Buffer | null = null;
  let appended;
  try {
    appended = transaction(deps.db, () => {
      if (!reachable(ctx, row)) deps.stores.controlRequests.add(row.source, row.run, 'answer', { answer, by }, now);
      const stored = deps.stores.events.append(row.source, row.run, event);
      if (reachable(ctx, row)) {
        previous = bytesOrNull(path);
        writeAnswer(deps.settings.answerDir, row.source, row.run, answer, by);
        written = true;
      }
      return stored;
    });
  } catch (err) {
    // A COMMIT the database refused took the event back: the file goes with it (an earlier answer is put back),
    // unless the run took it already.
    try {
      if (written) putBackAnswer(path, previous);
    } catch {
      // Best effort: the database's error is the request's answer either way.
    }
    throw err;
  }
  deps.bus.publish([appended]);
  return json(202, runToJson(row));
};
