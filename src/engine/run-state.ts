// The run as the engine keeps it in state.json: the run JSON of DESIGN §3 plus what the engine needs to steer it.
import { readFileSync } from 'node:fs';
import { statePath } from './paths.ts';
import { assertPlainDir, writeJsonAtomic } from './safe-fs.ts';
import {
  RUN_JSON_FIELDS, runFailure, type CostFigures, type FailureClass, type MeteredCost, type RunFailure, type RunJson,
} from '../run-json.ts';
import { errorMessage, isSvcError, type SvcErrorCode } from '../errors.ts';
import { ProviderMissingError } from './providers.ts';
import { PolicyError } from './policy.ts';
import { TrustNeededError } from './run-plan.ts';
import { SandboxUnavailableError } from '../spawn/sandbox-mode.ts';

/** What a run's worker process is asked to do with it (src/engine/worker.ts). */
export type WorkerMode = 'start' | 'resume' | 'verify';

export type InputKind = 'errtrack-file' | 'issue-url' | 'spec-file' | 'trackera' | 'brief';

/** The engine always knows where a run came from and what it was asked: these Run JSON fields are never null here. */
export interface RunState extends Omit<RunJson, 'reported' | 'metered'> {
  /** Run JSON's cost objects; a state.json written before metering has neither (toRunJson gives null). */
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
  base_sha: string | null;
  /** A run without a worktree: the tree its checkout held at the start, which its diff is taken against. */
  base_tree?: string | null;
  head_sha: string | null;
  spec_sha256: string;
  /** The worker process's identity, checked before any signal (STYLE: Processes). */
  pid: number | null;
  pgid: number | null;
  proc_start: string | null;
  /** Spending the user has approved so far; starts at the policy's max_usd. */
  budget_usd: number | null;
  /** The provider or check running now, in its own process group (null between steps). */
  child: { pid: number; pgid: number; proc_start: string | null } | null;
  /** Every answer given so far; a re-invoked provider gets them all appended to its prompt. */
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
  /** The provider CLI's own session, so that invoking it again continues it (provider-session.ts). */
  provider_session?: ProviderSession | null;
  /** The id of the span the run continues (SVC_TRACEPARENT at launch; src/trace.ts); null: a trace of its own. */
  trace_parent?: string | null;
}

/** What svc knows of the provider CLI's session (its words are the agent's: untrusted, fenced when quoted). */
export interface ProviderSession {
  /** The provider family the id belongs to: a CLI is only ever handed its own kind's id. */
  kind: string;
  /** The session id the CLI reported (shape-checked), or null when none was captured. */
  id: string | null;
  /** How many of the run's answers the session has been given, and the task it has (the run's spec_sha256). */
  answers_given: number;
  spec_sha256?: string | null;
  /** The provider's own questions so far, and the last thing it said: the summary when the session can't go on. */
  questions: string[];
  last_output: string | null;
  /** How the agent was invoked again: "session" while every time resumed it, "summary" once one could not. */
  resumed: 'session' | 'summary' | null;
}

/** The cost fields after a change to either figure: the gate's metered cost once it priced a call, else the agent's
 * report (docs/gate.md "Metered cost"); both are kept. */
export function withCost(
  state: RunState, change: { reported?: CostFigures; metered?: MeteredCost },
): Pick<RunJson, 'reported' | 'metered' | 'cost_usd' | 'tokens_in' | 'tokens_out'> {
  const given = change.reported;
  const reported = given === undefined ? state.reported ?? null
    : given.cost_usd === null && given.tokens_in === null && given.tokens_out === null ? null : given;
  const metered = change.metered ?? state.metered ?? null;
  const shown = metered !== null && metered.cost_usd !== null ? metered : reported ?? metered;
  return {
    reported, metered,
    cost_usd: shown?.cost_usd ?? null, tokens_in: shown?.tokens_in ?? null, tokens_out: shown?.tokens_out ?? null,
  };
}

/** The wire form (DESIGN §3): exactly the run JSON fields, nothing engine-internal. */
export function toRunJson(state: RunState): RunJson {
  const out: Record<string, unknown> = {};
  for (const key of RUN_JSON_FIELDS) out[key] = state[key] ?? null;
  return out as unknown as RunJson;
}

export function readState(dir: string): RunState {
  return JSON.parse(readFileSync(statePath(dir), 'utf8')) as RunState;
}

export function tryReadState(dir: string): RunState | null {
  try {
    return readState(dir);
  } catch {
    return null;
  }
}

export function writeState(dir: string, state: RunState): void {
  // The rename replaces a link named state.json rather than following it; the folder itself must not be a link.
  assertPlainDir(dir);
  writeJsonAtomic(statePath(dir), state);
}

// The one place a typed error becomes a failure class (docs/engine.md "Why a run failed"): by its code, and for the
// few subclasses whose code says less than their meaning, by the subclass. Never by the message.
const CLASS_OF_CODE: Readonly<Record<SvcErrorCode, FailureClass>> = {
  usage: 'config', bad_input: 'config', bad_setting: 'config', not_found: 'config',
  conflict: 'infra', refused: 'policy', unavailable: 'infra', failed: 'infra',
};

/** The failure an error that ended a run means; an error that is not svc's own (an errno: disk, files) is infra. */
export function failureOf(err: unknown): RunFailure {
  const reason = errorMessage(err);
  const config = err instanceof ProviderMissingError || err instanceof SandboxUnavailableError ||
    err instanceof PolicyError || err instanceof TrustNeededError;
  return runFailure(config ? 'config' : isSvcError(err) ? CLASS_OF_CODE[err.code] : 'infra', reason);
}
