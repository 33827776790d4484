// `svc pod seal`: before any agent code runs in a pod, records the base commit and where a pull request goes, and
// makes the run's key, on a volume only this init container and the signer mount, so nothing the agent does can
// change them or read the key.
import { FailedError, errorMessage } from '../errors.ts';
import { ControlApiError } from '../client/client.ts';
import type { IngestResult } from '../client/types.ts';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { handedRunKey, newRunKey, RUN_KEY } from '../engine/ids.ts';
import { RUN_KEY_FILE } from '../engine/paths.ts';
import { deletedRun, readIngestAnswer, shipperClient, type ControlItem } from '../engine/shipper.ts';
import { settingOr } from '../settings-registry.ts';
import { headAndBranch, repoSlug } from '../engine/git.ts';
import { isRoutedRepoName, launcherOrigin } from '../engine/spec.ts';
import { parseTraceparent } from '../trace.ts';
import { resolveOrigin } from '../engine/git-push.ts';
import { writeJsonAtomic } from '../engine/safe-fs.ts';
import { countOrNull, list, obj, str, tryParseJson } from '../untrusted.ts';

export interface Seal {
  base_sha: string;
  /** remote.origin.url before the run; null when there was none usable. */
  origin_url: string | null;
  /** Why origin_url is null, for the signer's error when a PR is asked for. */
  origin_problem: string | null;
  base_branch: string | null;
  sealed_at: string;
}

const SEAL_FILE = 'seal.json';
/** A full commit id, SHA-1 or SHA-256. */
export const COMMIT_ID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/**
 * The run's own key, in the sealed folder (the signer ships with it), and the key handed from it to the run
 * container's `svc start` through a secrets handoff file (`SVC_SECRETS_HANDOFF`, src/cli/node-setup.ts):
 * the agent can read the handed key, and the Control Plane refuses it once the signer's batch carried the run's own
 * (docs/control-data.md, "Each run's own runner"). Both files new ('wx'), 0600.
 */
function makeRunKeys(sealedDir: string, handoff: string): void {
  const key = newRunKey();
  writeFileSync(join(sealedDir, RUN_KEY_FILE), `${key}\n`, { mode: 0o600, flag: 'wx' });
  mkdirSync(dirname(handoff), { recursive: true, mode: 0o700 });
  const handed = handedRunKey(key);
  writeFileSync(handoff, JSON.stringify({ secrets: { SVC_RUN_KEY: handed } }), { mode: 0o600, flag: 'wx' });
}

type Stored = { unstored: string | null; control: ControlItem[]; stopAsked: boolean; lastSeq: number };

/**
 * Stores the run as the seal step saw it (queued, at the seal's time, so it replaces nothing a later batch stored
 * unless it moves the run: ingest-apply.ts) with `key`: the seal step's, bound to the handed key, before any agent
 * code runs, so the agent cannot store it first (without a key: left unbound; with one of its own: the signer's
 * batches refused); the signer's, with the sealed key, which moves the run onto it before anything of the run folder
 * is shipped (its row replacing what the run container shipped). A refusal (4xx) throws; so does a
 * run left unbound (stored first without a key, ingest's `unbound`) when `needBound`. Else `unstored`: why the
 * Control Plane did not answer (network, 5xx; storeRun tries again), or null; and `control`: the stop and answer
 * requests the batch took (the Control Plane marks them delivered, so the caller must act on them: none comes again),
 * and the run's deletion; `stopAsked`: whether a stop was ever asked for the run (ingest's `stop_asked`, sent to the
 * batch that moves it or writes it with the key it moved onto), taken by this batch or by the run container's worker;
 * `lastSeq`: the highest event seq the Control Plane stored for it (ingest's `last_seq`, to the same batches), or 0.
 */
async function storeSealedRun(
  env: NodeJS.ProcessEnv, run: string, seal: Seal, key: string, needBound: boolean,
): Promise<Stored> {
  const source = settingOr(env, 'SVC_SOURCE');
  const { client } = shipperClient(env);
  const queued = {
    run, status: 'queued', started_at: seal.sealed_at, updated_at: seal.sealed_at, run_key: key,
    repo: podRepoName(env, seal),
    // What the trigger dispatched, from the pod spec: the run container's rows never change them (runContainerRow).
    origin: launcherOrigin(env), trace_id: parseTraceparent(env.SVC_TRACEPARENT)?.traceId ?? null,
    // When the pod is surely over: a run still active then is ended by the Control Plane (the first lease stays).
    lease_until: env.SVC_RUN_LEASE_UNTIL ?? null,
  };
  let result: IngestResult;
  try {
    result = await client.ingest({ source, runs: [queued] });
  } catch (err) {
    if (err instanceof ControlApiError && err.status >= 400 && err.status < 500) {
      throw new FailedError(`The Control Plane refused run ${source}/${run}: ${errorMessage(err)}`);
    }
    return { unstored: errorMessage(err), control: [], stopAsked: false, lastSeq: 0 };
  }
  // The answer is read as untrusted (src/untrusted.ts): a list only when it is one.
  if (needBound && list(result.unbound).includes(run)) {
    throw new FailedError(`Run ${source}/${run} was stored without a key before the seal step: any sender of the ` +
      'source can write it');
  }
  const answer = readIngestAnswer(result, run);
  const deleted = answer.deleted ? [deletedRun(run)] : [];
  const stopAsked = list(result.stop_asked).includes(run);
  const lastSeq = countOrNull(list(result.last_seq).map(obj).find((r) => r.run === run)?.seq) ?? 0;
  return { unstored: null, control: [...answer.control, ...deleted], stopAsked, lastSeq };
}

/**
 * The repository a pod's run is of: the name the trigger routed the job to (runRepoName), else the sealed origin's, or
 * null. The seal step stores the run with it, and the run container's batches never change it (ingest-apply.ts); the
 * run folder's is the agent's word.
 */
export function podRepoName(env: NodeJS.ProcessEnv, seal: Seal): string | null {
  return isRoutedRepoName(env) ? env.SVC_REPO_NAME! : seal.origin_url ? repoSlug(seal.origin_url) : null;
}

/** The pauses between the tries to store a run: about 4 s in all before the pod fails. */
const STORE_RETRY_MS = [250, 500, 1000, 2000];

/**
 * `storeSealedRun`, tried again while the Control Plane does not answer, then a failure. The seal step (`handed` key):
 * a run the seal did not store, the agent (it holds the run container's Control Plane token and knows the run id)
 * could store first bound to a handed key of its own making and move onto that key itself, and a gone Job's outcome
 * would be its claim (kubernetes-executor.ts); the pod does not start its run. The signer (`sealed` key): a stop asked
 * after the run container's last batch comes only in the answer to the move, and the Control Plane never hands it out
 * again; a lost answer would have the signer sign and open the pull request of a stopped run. With no SVC_CONTROL_URL
 * there is no Control Plane the trigger reads: why it did not answer is returned, and the pod goes on.
 */
export async function storeRun(
  env: NodeJS.ProcessEnv, run: string, seal: Seal, key: { handed: string } | { sealed: string },
): Promise<Stored> {
  const handed = 'handed' in key;
  for (let tries = 0; ; tries++) {
    const stored = await storeSealedRun(env, run, seal, handed ? key.handed : key.sealed, handed);
    if (stored.unstored === null || !env.SVC_CONTROL_URL) return stored;
    const pause = STORE_RETRY_MS[tries];
    if (pause === undefined) {
      const id = `${settingOr(env, 'SVC_SOURCE')}/${run}`;
      const [what, asker] = handed ? ['stored bound to its handed key', 'the seal step']
        : ['moved onto the sealed key', 'the signer'];
      throw new FailedError(`Run ${id} is not ${what}: the Control Plane did not answer ${asker} (${stored.unstored})`);
    }
    await sleep(pause);
  }
}

/** A file the seal step wrote in the sealed folder. */
function readSealed(sealedDir: string, name: string): string {
  try {
    return readFileSync(join(sealedDir, name), 'utf8');
  } catch {
    throw new FailedError(`No readable ${name} in ${sealedDir}: the pod's seal step did not run`);
  }
}

/** The key `svc pod seal` made for the run, as the signer ships with it; never echoed. */
export function readSealedRunKey(sealedDir: string): string {
  const key = readSealed(sealedDir, RUN_KEY_FILE).trim();
  if (!RUN_KEY.test(key)) throw new FailedError(`${RUN_KEY_FILE} in ${sealedDir} is not a run key`);
  return key;
}

export function writeSeal(repo: string, sealedDir: string, handoff: string): Seal {
  let origin_url: string | null = null;
  let origin_problem: string | null = null;
  try {
    origin_url = resolveOrigin(repo).url;
  } catch (err) {
    origin_problem = errorMessage(err);
  }
  const head = headAndBranch(repo);
  const seal: Seal = {
    base_sha: head.sha, origin_url, origin_problem, base_branch: head.branch,
    sealed_at: new Date().toISOString(),
  };
  writeJsonAtomic(join(sealedDir, SEAL_FILE), seal);
  makeRunKeys(sealedDir, handoff);
  return seal;
}

export function readSeal(sealedDir: string): Seal {
  const s = obj(tryParseJson(readSealed(sealedDir, SEAL_FILE)));
  const base = str(s.base_sha);
  if (!base || !COMMIT_ID.test(base)) throw new FailedError(`${SEAL_FILE} has no base commit`);
  return {
    base_sha: base, origin_url: str(s.origin_url), origin_problem: str(s.origin_problem),
    base_branch: str(s.base_branch), sealed_at: str(s.sealed_at) ?? '',
  };
}
