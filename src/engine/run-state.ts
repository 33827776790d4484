// A run's folder as the engine keeps it: state.json (the run JSON of DESIGN §3 plus what the engine needs to steer
// it), events.jsonl, and the runs of a checkout.
import { closeSync, fstatSync, lstatSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { RUN_KEY_FILE, statePath } from './paths.ts';
import { openAppendNoFollowIn, openRunDir, plainEngineFolder, withDir, writeJsonAtomic } from './safe-fs.ts';
import { git, repoRoot } from './git.ts';
import { isValidSegment, newRunKey, RUN_KEY } from './ids.ts';
import {
  listPlain, openPlainDirIn, openPlainPath, openRunFolder, pathIn, readObjectIn, readPlainIn, type PlainDir,
} from './plain-tree.ts';
import {
  RUN_JSON_FIELDS, runFailure, type CostFigures, type FailureClass, type MeteredCost, type RunFailure, type RunJson,
} from '../run-json.ts';
import { countOrNull, objOrNull, tryParseJson } from '../untrusted.ts';
import { BadSettingError, errorMessage, RefusedError, SvcError, type SvcErrorCode } from '../errors.ts';
import { ProviderMissingError } from './providers.ts';
import { PolicyError } from './policy.ts';
import { TrustNeededError } from './config.ts';
import { SandboxUnavailableError } from '../spawn/sandbox-mode.ts';
import { PrlimitMissingError } from '../spawn/limits.ts';
import type { NamespaceInit } from './proc-group.ts';
import type { ProcIdentity } from '../proc-stat.ts';
import { orNull } from '../spawn/tree.ts';
import { jsonWithoutSecrets, redactSecrets } from './text.ts';

export type WorkerMode = 'start' | 'resume' | 'verify';

export type InputKind = 'errtrack-file' | 'issue-url' | 'spec-file' | 'trackera' | 'brief';

/** The engine always knows where a run came from and what it was asked: these Run JSON fields are never null here. */
export interface RunState extends Omit<RunJson, 'reported' | 'metered'> {
  /** A state.json written before metering has neither (toRunJson gives null). */
  reported?: CostFigures | null;
  metered?: MeteredCost | null;
  repo: string;
  brief: string;
  origin: string;
  provider: string;
  repo_path: string;
  input: { kind: InputKind; value: string };
  /** Where the provider works: the worktree for --worktree/--pr, else the repo itself. */
  workdir: string;
  worktree: boolean;
  pr: boolean;
  /** A follow-up run's PR branch, the PR's address, and the run before it there with its receipt (follow-up.ts). */
  follow_up?: {
    branch: string;
    pr_url: string | null;
    previous: { source: string; run: string; receipt: string | null } | null;
  } | null;
  base_sha: string;
  /** A run without a worktree: the tree its checkout held at the start, which its diff is taken against. */
  base_tree?: string | null;
  head_sha: string | null;
  spec_sha256: string;
  /** The worker's identity, checked before any signal (STYLE: Processes). */
  pid: number | null;
  pgid: number | null;
  proc_start: string | null;
  /** Spending the user has approved so far; starts at the policy's max_usd. */
  budget_usd: number | null;
  /** The provider or check running now, in its own process group (null between steps); with its sandbox's namespace
   * init once bwrap reported it, which is in no group of svc's: a stop from outside the worker kills it by its own. */
  child: (ProcIdentity & { init?: NamespaceInit }) | null;
  /** The identity of the last `svc start --verify` worker: the run's `pid` stays its last attempt's, yet a verify
   * worker's last write too puts back its own copy of state.json (launch.ts afterLastWorker waits for both). */
  verifier?: ProcIdentity | null;
  answers: string[];
  /** Branch the repo had checked out when the run was made (the PR base unless the policy names one). */
  base_branch: string | null;
  /** The required check whose failure failed the run: a re-verify tells it from a run whose provider failed. */
  failed_check?: string | null;
  /** The operator's daily caps as answers raised them for this run (docs/gate.md "Budgets"). */
  budget_caps?: { repo_day?: number; server_day?: number };
  /** How many times the worker started the run over by itself after an infra failure before its agent ran (0 or 1). */
  infra_retries?: number;
  /** Unset until the run's provider first ran; then whether its model answered (docs/engine.md "Why a run failed"). */
  model_answered?: boolean;
  provider_session?: ProviderSession | null;
  /** The id of the span the run continues (SVC_TRACEPARENT at launch; src/trace.ts); null: a trace of its own. */
  trace_parent?: string | null;
  /** svc's own account of every connection its gates saw in the run's sessions so far, and the sha256 of the
   * egress.jsonl they left: the next session's gate (a resume, a verify) goes on from it (src/engine/egress.ts).
   * `previous`: the sha256 of the file before the last session wrote its lines (written first, so a worker stopped
   * between the two writes leaves a file svc still knows). */
  egress?: { connections: number; denied: number; sha256: string; previous?: string | null } | null;
}

/** What svc knows of the provider CLI's session (docs/engine.md "Resuming the CLI's session"); its words are the
 * agent's: untrusted, fenced when quoted. */
export interface ProviderSession {
  /** The provider family the id belongs to: a CLI is only ever handed its own kind's id. */
  kind: string;
  id: string | null;
  answers_given: number;
  spec_sha256?: string | null;
  questions: string[];
  last_output: string | null;
  resumed: 'session' | 'summary' | null;
}

/** The wire form (DESIGN §3): exactly the run JSON fields, nothing engine-internal. */
export function toRunJson(state: RunState): RunJson {
  const out: Record<string, unknown> = {};
  for (const key of RUN_JSON_FIELDS) out[key] = state[key] ?? null;
  return out as unknown as RunJson;
}

/** events.jsonl: one event per line with a per-run seq continued from the last line on disk, or from `seqAfter` when
 * higher (DESIGN §3). The run folder is held open until close(): read and appended to inside it, never through a link
 * there or on the way. */
export function openEventLog(
  dir: string, onAppend?: () => void, seqAfter = 0,
): { append(kind: string, data?: Record<string, unknown>): void; close(): void } {
  const opened = openRunFolder(dir);
  let folder = 'failed' in opened ? null : opened;
  let seq = seqAfter;
  // A last line without its newline (a writer killed mid-line, a disk that filled): the next line starts on a line of
  // its own, or it would be glued to the fragment and lost with it.
  let torn = false;
  try {
    const text = folder ? readPlainIn(folder, 'events.jsonl', Infinity) : 'missing';
    if (typeof text !== 'string') torn = text.length > 0 && text[text.length - 1] !== 10;
    // A blank line, or a torn last line from a killed writer, is skipped, not fatal; so is a seq ingest would refuse
    // (a pod signer's copy is the agent's to write: `{"seq":1e999}` would number every later event null).
    for (const line of typeof text === 'string' ? [] : text.toString('utf8').split('\n')) {
      seq = Math.max(seq, countOrNull(objOrNull(tryParseJson(line))?.seq) ?? 0);
    }
    // A seq so high that the events after it would not be safe integers (ingest-validate.ts refuses them).
    if (!Number.isSafeInteger(seq + 2 ** 32)) {
      throw new RefusedError(`The run's events would follow seq ${seq} (${dir}): they have no room`);
    }
  } catch (err) {
    folder?.close();
    throw err;
  }
  let fd: number | null = null;
  let closed = false;
  const release = (): void => {
    if (fd !== null) closeSync(fd);
    fd = null;
    folder?.close();
    folder = null;
  };
  return {
    append(kind, data = {}) {
      // Its folder is closed: an append would write through whatever took its fd's number since.
      if (closed) throw new TypeError(`The event log of "${dir}" is closed`);
      // The file held open has no name left once the run folder (or events.jsonl) was removed: opened again by the
      // folder's path, so a removed run is refused ("Run folder … is missing") rather than written into a file no one
      // can read. One fstat (~1.5 µs) per append keeps the file held open: opening it per append cost 256 µs, not 5.7.
      if (fd !== null && fstatSync(fd).nlink === 0) release();
      seq += 1;
      // O_APPEND, so lines never interleave; never through a planted link (events.jsonl -> ~/.bashrc). A folder not
      // plain when opened is opened again, to be refused naming what stands in the way.
      const open = (run: PlainDir) => openAppendNoFollowIn(run, 'events.jsonl');
      fd ??= folder ? open(folder) : withDir(openRunDir(dir), open);
      // Every reader of the Control Plane reads the log: no secret a line quotes goes into it.
      const line = jsonWithoutSecrets({ seq, ts: new Date().toISOString(), kind, data }) + '\n';
      try {
        writeFileSync(fd, torn ? `\n${line}` : line);
      } catch (err) {
        // Part of it may be on disk (ENOSPC after a short write).
        torn = true;
        throw err;
      }
      torn = false;
      onAppend?.();
    },
    close() {
      closed = true;
      release();
    },
  };
}

export function appendEvent(dir: string, kind: string, data: Record<string, unknown>): void {
  const log = openEventLog(dir);
  try {
    log.append(kind, data);
  } finally {
    log.close();
  }
}

export function readState(dir: string): RunState {
  return JSON.parse(readFileSync(statePath(dir), 'utf8')) as RunState;
}

export function tryReadState(dir: string): RunState | null {
  return orNull(() => readState(dir));
}

export function writeState(dir: string, state: RunState): void {
  // The rename replaces a link named state.json rather than following it; the folder is held open, none on its way
  // a link.
  withDir(openRunDir(dir), (run) => writeJsonAtomic(pathIn(run, 'state.json'), state));
}

/**
 * Makes the run's own key, once, with the run: only its owner may read it. The shipper sends it with each batch and
 * the Control Plane binds the run to it on first sight, so another runner of the same source (a runner token is shared
 * by every job pod) can neither write this run nor take its answers and stops (docs/control-data.md).
 */
export function makeRunKey(dir: string, key: string = newRunKey()): void {
  // 'wx' (O_EXCL) makes a new file or fails: never through a planted link, never over a key already shipped.
  withDir(openRunDir(dir), (run) => writeFileSync(pathIn(run, RUN_KEY_FILE), key + '\n', { mode: 0o600, flag: 'wx' }));
}

/**
 * The key of a run the Control Plane queued: made with its row, which it binds from birth, and handed to the run's
 * launcher as SVC_RUN_KEY on fd 3, never in an environment (run-controller.ts); else a new one. Never echoed.
 */
export function runKeyFor(env: NodeJS.ProcessEnv): string {
  const handed = env.SVC_RUN_KEY;
  if (!handed) return newRunKey();
  if (!RUN_KEY.test(handed)) throw new BadSettingError('SVC_RUN_KEY must be 32 to 128 letters, digits, "_" or "-"');
  return handed;
}

export type Found = { run: string; state: RunState };

/** git failed in a git checkout (dubious ownership, no git, a corrupt index): what it commits is unknown, so each
 * caller fails closed (docs/engine.md, after --retry). Never read as "nothing is committed". */
export class UntrackableError extends RefusedError {}

/** Whether a name directly under a folder is committed to the repository. */
export type Committed = (name: string) => boolean;

/** Whether `dir` or a folder above it holds a `.git` that looks like a repository's (a project in a checkout's
 * subfolder has none of its own): a gitfile, or a folder with HEAD, objects and refs. An empty `.git` folder is
 * none. */
function inGitCheckout(dir: string): boolean {
  for (let at = resolve(dir); ; at = dirname(at)) {
    const dotGit = join(at, '.git');
    // Followed: a .git that is a link to a git directory is a checkout's as much as the directory itself.
    const found = statSync(dotGit, { throwIfNoEntry: false });
    if (found?.isFile()) return true;
    const parts = found?.isDirectory() ? ['HEAD', 'objects', 'refs'] : [];
    if (parts.length && parts.every((part) => lstatSync(join(dotGit, part), { throwIfNoEntry: false }))) return true;
    if (dirname(at) === at) return false;
  }
}

/**
 * Which names under `<repo>/<folder>` git tracks anything in: the repository's own content, never svc's. A path git
 * lists at the folder or above it (a submodule's gitlink or a link at `.svc` or `.svc/runs`) commits everything under
 * it. When git fails, a folder with no .git in it or above it (no repository) commits nothing; a folder of a git
 * checkout throws UntrackableError.
 */
export function trackedNames(repo: string, folder: string): Committed {
  const parts = folder.split('/');
  // The first segment, not the folder: git lists nothing for a pathspec behind a gitlink. Not --recurse-submodules:
  // one submodule git cannot read would fail the whole listing.
  let listed: string[];
  try {
    listed = git(repo, ['ls-files', '-z', '--', parts[0]!]).split('\0').filter(Boolean);
  } catch (err) {
    if (!inGitCheckout(repo)) return () => false;
    throw new UntrackableError(`git could not list what the repository tracks (${errorMessage(err)})`);
  }
  if (listed.some((path) => folder === path || folder.startsWith(`${path}/`))) return () => true;
  const under = listed.filter((path) => path.startsWith(`${folder}/`));
  const names = new Set(under.map((path) => path.split('/')[parts.length]!));
  return (name) => names.has(name);
}

/** Refuses a run folder git tracks before anything reads it to act (resume, retry, verify, open-pr, stop): it is the
 * repository's content, which whoever can push writes (its plan.json could name any sandbox and program; DESIGN §7a),
 * not a run svc made; localRuns() skips it for the same reason. When git cannot tell, UntrackableError refuses it. */
export function refuseTrackedRun(repo: string, run: string): void {
  // First the folders: a link at .svc or .svc/runs is refused whether committed or not.
  plainEngineFolder(repo, 'runs').close();
  const outer = projectHoldingToo(repo, run);
  if (outer !== null) {
    throw new RefusedError(`Refusing to use run ${run} in ${repo}: the project around it, ${outer}, holds run ` +
      `${run}; this is a copy in a repository made inside that project's tree, which a run's agent can write, not ` +
      `the run svc made (nothing was started; name the project with --repo ${outer})`);
  }
  if (!trackedNames(repo, '.svc/runs')(run)) return;
  throw new RefusedError(`Refusing to use run ${run}: its folder .svc/runs/${run} is committed to the repository, so ` +
    'it is the repository\'s content, not a run svc made here (nothing was started)');
}

/**
 * The project whose working tree holds `repo` and that has a run folder `run` too, or null. Run ids are unique, so
 * the inner one is a copy: an agent that works in the project's tree can make a repository there and plant a run
 * folder of its own run's id in it, plan.json and all (it runs as the same user; docs/engine.md "The run's plan").
 */
export function projectHoldingToo(repo: string, run: string): string | null {
  const outer = repoRoot(dirname(repo));
  return outer !== null && lstatSync(join(outer, '.svc', 'runs', run), { throwIfNoEntry: false }) ? outer : null;
}

/** trackedNames, with everything committed when git cannot tell: for readers that then skip what is committed. */
export function trackedOrAll(repo: string, folder: string): Committed {
  try {
    return trackedNames(repo, folder);
  } catch (err) {
    if (err instanceof UntrackableError) return () => true;
    throw err;
  }
}

/**
 * The runs svc made in `<repo>/.svc/runs`, read without following a link, skipping run folders git tracks. When git
 * cannot tell what the checkout commits, no run folder is taken as svc's: none is found, or, `strict`, UntrackableError
 * — for a caller that reads "no run" as "nothing in use" (is the checkout free, may a worktree go), where none found
 * would fail open. `only`: that one run, reading its folder and no other.
 */
export function localRuns(repo: string, { strict = false, only }: { strict?: boolean; only?: string } = {}): Found[] {
  const runs = openPlainPath(repo, ['.svc', 'runs']);
  if ('failed' in runs) return [];
  return withDir(runs, () => {
    const found: Found[] = [];
    // The check refuseTrackedRun makes, for `only` too: a pathspec of the run's own folder would miss a submodule
    // committed there.
    const tracked = strict ? trackedNames(repo, '.svc/runs') : trackedOrAll(repo, '.svc/runs');
    const names = only === undefined ? listPlain(runs).filter((e) => e.kind === 'dir').map((e) => e.name) : [only];
    for (const name of names) {
      if (!isValidSegment(name) || tracked(name)) continue;
      const state = readRunIn(runs, name);
      if (state) found.push({ run: name, state });
    }
    return found;
  });
}

/** The one run `run` as localRuns() would find it (svc answer, svc runs logs); null when it would not list it. */
export function localRun(repo: string, run: string): RunState | null {
  return localRuns(repo, { only: run })[0]?.state ?? null;
}

/** The state of run folder `name` in `runs`, held open: null for anything svc did not write there. */
function readRunIn(runs: PlainDir, name: string): RunState | null {
  const dir = openPlainDirIn(runs, name);
  if (typeof dir === 'string') return null;
  try {
    // Not a JSON object, or one not naming its folder's run: not a run svc wrote.
    const state = readObjectIn(dir, 'state.json', () => undefined);
    return state?.run === name && typeof state.status === 'string' ? state as unknown as RunState : null;
  } catch {
    // unreadable: not a run svc wrote either
    return null;
  } finally {
    dir.close();
  }
}

// The one place a typed error becomes a failure class (docs/engine.md "Why a run failed"): by its code, and for the
// few subclasses whose code says less than their meaning, by the subclass. Never by the message.
const CLASS_OF_CODE: Readonly<Record<SvcErrorCode, FailureClass>> = {
  usage: 'config', bad_input: 'config', bad_setting: 'config', not_found: 'config',
  conflict: 'infra', refused: 'policy', unavailable: 'infra', failed: 'infra',
};

/** The failure an error that ended a run means; an error that is not svc's own (an errno: disk, files) is infra. */
export function failureOf(err: unknown): RunFailure {
  const reason = redactSecrets(errorMessage(err));
  const config = err instanceof ProviderMissingError || err instanceof SandboxUnavailableError ||
    err instanceof PrlimitMissingError || err instanceof PolicyError || err instanceof TrustNeededError;
  return runFailure(config ? 'config' : err instanceof SvcError ? CLASS_OF_CODE[err.code] : 'infra', reason);
}

/** Whether this run leaves the receipt to a signer container (set only by the pod spec). */
export function signsLater(env: NodeJS.ProcessEnv): boolean {
  return env.SVC_SIGN_LATER === '1';
}

/** Whether this run is a job pod's behind the shared `svc gate serve`, which its environment names (pod spec only). */
export function behindSharedGate(env: NodeJS.ProcessEnv): boolean {
  return signsLater(env) && !!env.SVC_GATE_EVIDENCE_URL;
}
