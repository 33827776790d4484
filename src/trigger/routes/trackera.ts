// POST /trackera: hex HMAC of the body + signed webhookTimestamp within 300 s; issue events → `svc start trackera:<id> --detach`.
import { parseJsonObject } from '../../http/body.ts';
import type { Reply } from '../../http/respond.ts';
import { verifyTrackeraSignature, checkTrackeraTimestamp } from '../verify.ts';
import { readTrackera, saveTrackeraPayload } from '../sources/trackera.ts';
import { trackeraArgs } from '../args.ts';
import { bodyKey, enqueue, rawOf, requireValid, secretFor, skipped, type TCtx } from './common.ts';

export async function receiveTrackera(ctx: TCtx): Promise<Reply> {
  const secret = secretFor(ctx, 'trackera');
  const raw = rawOf(ctx);
  requireValid(ctx, 'trackera', verifyTrackeraSignature(secret, raw, ctx.req.headers['trackera-signature']));
  const body = parseJsonObject(raw);
  requireValid(ctx, 'trackera', checkTrackeraTimestamp(body.webhookTimestamp, ctx.deps.clock()));
  const input = readTrackera(body);
  if (input.kind === 'skip') return skipped(input.reason);
  await saveTrackeraPayload(ctx.deps.settings.repoDir, input.identifier, raw);
  return enqueue(ctx, {
    origin: 'trackera',
    brief: `trackera:${input.identifier}`,
    args: trackeraArgs(input.identifier),
    dedupeKeys: [bodyKey('trackera', raw)],
    reply: { channel: 'trackera', target: { issue_id: input.issueId, identifier: input.identifier } },
  });
}
