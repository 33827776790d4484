// Merge queue (DESIGN §4): only runs with a PR and a receipt the policy accepts; POST /v1/merge/run merges in order,
// re-checking every receipt first. It merges the pull request a run's receipt covers, and no other: the PR named by
// pr_url must be in the receipt's repo on its branch, and GitHub is told the receipt's head commit.
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import { json } from '../../http/respond.ts';
import { iso } from '../../iso-time.ts';
import type { ControlDeps } from '../deps.ts';
import { bodyFields, checkSegment, storedRun } from '../params.ts';
import { checkRunReceipt, type Signer } from '../run-receipt.ts';
import { noteAudit } from '../audited.ts';
import type { MergeEntry } from '../../db/control-stores.ts';
import type { Receipt } from '../../engine/receipt.ts';
import { githubFetch } from '../../engine/github-rest.ts';
import { obj, str } from '../../untrusted.ts';
import { errorMessage } from '../../errors.ts';

/** `signed_by` names the known key whose signature on the run's receipt checks out now, else null. */
function entryJson(deps: ControlDeps, e: MergeEntry, signer?: Signer | null) {
  const row = deps.stores.runs.get(e.source, e.run);
  if (signer === undefined) {
    const check = row ? checkRunReceipt(deps, row) : null;
    signer = check?.ok ? check.signer : null;
  }
  return {
    id: e.id, source: e.source, run: e.run, status: e.status, detail: e.detail, pr_url: row?.pr_url ?? null,
    verdict: row?.verdict ?? null, signed_by: signer,
    added_at: iso(e.added_at), updated_at: iso(e.updated_at),
  };
}

export const listMergeQueue: Handler<ControlDeps> = (ctx) => {
  return json(200, { items: ctx.deps.stores.mergeQueue.list().map((e) => entryJson(ctx.deps, e)) });
};

export const addToMergeQueue: Handler<ControlDeps> = (ctx) => {
  const { deps } = ctx;
  const body = bodyFields(ctx.body, 'RunTarget');
  const source = checkSegment('source', body.source);
  const run = checkSegment('run', body.run);
  const row = storedRun(deps.stores.runs, { source, run });
  const check = checkRunReceipt(deps, row);
  if (!check.ok) throw new HttpError('conflict', check.reason);
  noteAudit(ctx, { signed_by: check.signer.kid, key_name: check.signer.name });
  const added = deps.stores.mergeQueue.add(source, run, deps.clock());
  if (!added) return json(200, entryJson(deps, deps.stores.mergeQueue.get(source, run)!, check.signer));
  return json(201, entryJson(deps, added, check.signer));
};

export const runMergeQueue: Handler<ControlDeps> = async (ctx) => {
  const { deps } = ctx;
  const results = [];
  const signers: Record<string, string | null> = {};
  const notRecorded = [];
  for (const entry of deps.stores.mergeQueue.queued()) {
    const row = deps.stores.runs.get(entry.source, entry.run);
    const check = row ? checkRunReceipt(deps, row) : ({ ok: false, reason: 'The run no longer exists' } as const);
    // pr_url can be rewritten by a later ingest, so the PR is checked against the receipt before it is merged.
    const problem = check.ok ? await mergeReceiptPull(deps.env, row!.pr_url!, check.receipt) : check.reason;
    const status = problem ? 'failed' : 'merged';
    const signer = check.ok ? check.signer : null;
    signers[`${entry.source}/${entry.run}`] = signer?.kid ?? null;
    try {
      deps.stores.mergeQueue.setStatus(entry.id, status, problem, deps.clock());
    } catch (err) {
      // GitHub has already done (or refused) this entry and the earlier ones, so the request is not answered as
      // one that was not done: the answer says what happened, names the entry left queued, and merges no more.
      const error = `The outcome could not be stored: ${errorMessage(err)}`;
      notRecorded.push({ source: entry.source, run: entry.run, status, detail: problem, error });
      break;
    }
    results.push(entryJson(deps, deps.stores.mergeQueue.get(entry.source, entry.run)!, signer));
  }
  noteAudit(ctx, { signed_by: signers });
  return json(200, notRecorded.length ? { items: results, not_recorded: notRecorded } : { items: results });
};

const NAME = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,100}$/;

/** owner/repo/number from a PR page URL; names are checked so a stored URL cannot steer the API path elsewhere. */
function pullOf(prUrl: string): { owner: string; repo: string; number: string } | null {
  const m = /\/([^/]+)\/([^/]+)\/pull\/(\d+)\/?$/.exec(prUrl);
  if (!m || !NAME.test(m[1]!) || !NAME.test(m[2]!)) return null;
  return { owner: m[1]!, repo: m[2]!, number: m[3]! };
}

/** Why the PR (GitHub's answer, read as untrusted) is not the one the receipt covers, or null when it is. */
function pullMismatch(pull: unknown, receipt: Receipt): string | null {
  const base = str(obj(obj(obj(pull).base).repo).full_name);
  const head = obj(obj(pull).head);
  const headRepo = str(obj(head.repo).full_name);
  const inRepo = (name: string | null) => name?.toLowerCase() === receipt.repo.toLowerCase();
  if (!inRepo(base)) {
    return `The pull request is in ${base ?? 'an unknown repository'}, not ${receipt.repo} as the receipt says`;
  }
  if (head.ref !== receipt.branch || !inRepo(headRepo)) {
    const merges = `${headRepo ?? '?'}:${str(head.ref) ?? '?'}`;
    return `The pull request merges ${merges}, not ${receipt.repo}:${receipt.branch} as the receipt says`;
  }
  if (typeof head.sha === 'string' && head.sha !== receipt.head_sha) {
    return `The pull request head is ${head.sha.slice(0, 12)}, ` +
      `not the receipt's ${receipt.head_sha!.slice(0, 12)}: it has commits the receipt does not cover`;
  }
  return null;
}

/** Null once merged, else why not. */
async function mergeReceiptPull(
  env: NodeJS.ProcessEnv, prUrl: string, receipt: Receipt,
): Promise<string | null> {
  const pull = pullOf(prUrl);
  if (!pull) return `Cannot read the pull request from ${prUrl}`;
  if (!receipt.branch || receipt.branch !== `svc/${receipt.run}`) {
    return `The receipt names branch ${String(receipt.branch)}, not svc/${receipt.run}`;
  }
  if (!receipt.head_sha || !/^[0-9a-f]{40}$/.test(receipt.head_sha)) return 'The receipt names no head commit';
  const token = env.GITHUB_TOKEN || env.GH_TOKEN;
  if (!token) return 'No GitHub token (GITHUB_TOKEN or GH_TOKEN) is set for the Control Plane';
  const api = `/repos/${pull.owner}/${pull.repo}/pulls/${pull.number}`;
  try {
    const got = await githubFetch(env, token, 'GET', api);
    if (!got.ok) {
      return `GitHub answered ${got.status} when reading the pull request: ${(await got.text()).slice(0, 200)}`;
    }
    const found: unknown = await got.json();
    const mismatch = pullMismatch(found, receipt);
    if (mismatch) return mismatch;
    // Merged at the receipt's head already (an earlier merge/run whose outcome was not stored): asked again, it is
    // recorded merged, never merged a second time (GitHub would refuse it with 405). Only when GitHub names that head:
    // one merged by hand at another head, or with none named, merged commits the receipt does not cover.
    if (obj(found).merged === true) {
      if (obj(obj(found).head).sha === receipt.head_sha) return null;
      return 'The pull request was merged already, not at the receipt\'s head: it was merged without the merge queue';
    }
    // sha: GitHub refuses the merge (409) if the head moved after we looked (DESIGN §4: merge what the receipt covers).
    const res = await githubFetch(env, token, 'PUT', `${api}/merge`, { sha: receipt.head_sha });
    if (res.ok) return null;
    return `GitHub answered ${res.status}: ${(await res.text()).slice(0, 200)}`;
  } catch (err) {
    return `GitHub could not be reached: ${errorMessage(err)}`;
  }
}
