// POST /trackerb: `X-Hub-Signature: sha256=<hex>`; filtered issue events → `svc start --brief "<brief>" --pr --detach`.
// No signed timestamp: the delivery id and the body hash are the replay defence (spec "trackerb replay protection").
import { parseJsonObject } from '../../http/body.ts';
import type { Reply } from '../../http/respond.ts';
import { verifyHubSignature } from '../verify.ts';
import { firstHeader, signedHeaders, sourceOf } from '../../webhook-sources.ts';
import { readTrackerb } from '../sources/trackerb.ts';
import { briefPrArgs } from '../../spawn/start-argv.ts';
import { bodyKey, enqueue, rawOf, requireValid, secretFor, skipped, unserved, type TCtx } from './common.ts';

export async function receiveTrackerb(ctx: TCtx): Promise<Reply> {
  const secret = secretFor(ctx, 'trackerb');
  const raw = rawOf(ctx);
  requireValid(ctx, 'trackerb', verifyHubSignature(secret, raw, signedHeaders(ctx.req.headers, 'trackerb').signature));
  const input = readTrackerb(parseJsonObject(raw), ctx.deps.settings.trackerbFilter);
  if (input.kind === 'skip') return skipped(input.reason);
  const routed = ctx.deps.settings.repos.route('trackerb', input.project);
  if (routed.kind === 'unserved') return skipped(unserved(ctx, 'trackerb', routed.reason));
  // Jira's X-Atlassian-Webhook-Identifier is the same across its retries (vendor-webhooks.md §1.4).
  const delivery = firstHeader(ctx.req.headers, sourceOf('trackerb').delivery)?.trim();
  const keys = [bodyKey('trackerb', raw), ...(delivery ? [`trackerb:delivery:${delivery.slice(0, 200)}`] : [])];
  const brief = input.brief;
  return enqueue(ctx, {
    origin: 'trackerb',
    repo: routed.repo.name,
    dedupeKeys: keys,
    reply: { channel: 'trackerb', target: { issue_key: input.key } },
    job: { brief, args: briefPrArgs(brief) },
  });
}
