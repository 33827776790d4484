// POST /trackerb: `X-Hub-Signature: sha256=<hex>`; filtered issue events → `svc start --brief "<brief>" --pr --detach`.
// No signed timestamp: the delivery id and the body hash are the replay defence (spec "trackerb replay protection").
import { parseJsonObject } from '../../http/body.ts';
import type { Reply } from '../../http/respond.ts';
import { verifyTrackerb } from '../verify.ts';
import { readTrackerb } from '../sources/trackerb.ts';
import { briefPrArgs } from '../args.ts';
import { bodyKey, enqueue, header, rawOf, requireValid, secretFor, skipped, unserved, type TCtx } from './common.ts';

export async function receiveTrackerb(ctx: TCtx): Promise<Reply> {
  const secret = secretFor(ctx, 'trackerb');
  const raw = rawOf(ctx);
  requireValid(ctx, 'trackerb', verifyTrackerb(secret, raw, ctx.req.headers['x-hub-signature']));
  const input = readTrackerb(parseJsonObject(raw), ctx.deps.settings.trackerbFilter);
  if (input.kind === 'skip') return skipped(input.reason);
  const routed = ctx.deps.settings.repos.route('trackerb', input.project);
  if (routed.kind === 'unserved') return skipped(unserved(ctx, 'trackerb', routed.reason));
  const delivery = header(ctx, 'x-vendorb-webhook-identifier')?.trim();
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
