// Merge queue (DESIGN §4): only runs with a PR and a receipt the policy accepts; POST /v1/merge/run merges in order,
// re-checking every receipt first.
import { HttpError } from '../../http/http-error.ts';
import { checkBodyKeys, requireJsonObject } from '../../http/body.ts';
import type { Handler } from '../../http/pipeline.ts';
import { json } from '../../http/respond.ts';
import { iso } from '../../iso-time.ts';
import type { ControlDeps } from '../deps.ts';
import { checkSegment, checkQueryKeys, storedRun } from '../params.ts';
import { checkRunReceipt, type Signer } from '../run-receipt.ts';
import { noteAudit } from '../audited.ts';
import type { MergeEntry } from '../../db/control-stores.ts';
import { mergeReceiptPull } from '../github-merge.ts';

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
  checkQueryKeys(ctx.query, []);
  return json(200, { items: ctx.deps.stores.mergeQueue.list().map((e) => entryJson(ctx.deps, e)) });
};

export const addToMergeQueue: Handler<ControlDeps> = (ctx) => {
  const { deps } = ctx;
  const body = requireJsonObject(ctx.body);
  checkBodyKeys(body, ['source', 'run']);
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
  for (const entry of deps.stores.mergeQueue.queued()) {
    const row = deps.stores.runs.get(entry.source, entry.run);
    const check = row ? checkRunReceipt(deps, row) : ({ ok: false, reason: 'The run no longer exists' } as const);
    // pr_url can be rewritten by a later ingest, so the PR is checked against the receipt before it is merged.
    const problem = check.ok ? await mergeReceiptPull(deps.env, row!.pr_url!, check.receipt) : check.reason;
    deps.stores.mergeQueue.setStatus(entry.id, problem ? 'failed' : 'merged', problem, deps.clock());
    const signer = check.ok ? check.signer : null;
    signers[`${entry.source}/${entry.run}`] = signer?.kid ?? null;
    results.push(entryJson(deps, deps.stores.mergeQueue.get(entry.source, entry.run)!, signer));
  }
  noteAudit(ctx, { signed_by: signers });
  return json(200, { items: results });
};
