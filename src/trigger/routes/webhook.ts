// POST /webhook (GitHub): `X-Hub-Signature-256: sha256=<hex>` with GITHUB_WEBHOOK_SECRET; see sources/webhook.ts.
import { parseJsonObject } from '../../http/body.ts';
import type { Reply } from '../../http/respond.ts';
import { verifyHubSignature } from '../verify.ts';
import { firstHeader, signedHeaders, sourceOf } from '../../webhook-sources.ts';
import { checkEventHeader, EventMismatchError, readWebhook } from '../sources/webhook.ts';
import { HttpError } from '../../http/http-error.ts';
import { briefPrArgs } from '../../spawn/start-argv.ts';
import { bodyKey, enqueue, rawOf, requireValid, secretFor, skipped, unserved, type TCtx } from './common.ts';

export async function receiveWebhook(ctx: TCtx): Promise<Reply> {
  const secret = secretFor(ctx, 'webhook');
  const raw = rawOf(ctx);
  requireValid(ctx, 'webhook', verifyHubSignature(secret, raw, signedHeaders(ctx.req.headers, 'webhook').signature));
  const event = firstHeader(ctx.req.headers, sourceOf('webhook').resource) ?? '';
  const body = parseJsonObject(raw);
  try {
    checkEventHeader(event, body);
  } catch (err) {
    if (!(err instanceof EventMismatchError)) throw err;
    const reason = 'event header does not match the body';
    ctx.deps.log.warn('webhook refused', { route: 'webhook', reason, request_id: ctx.requestId });
    throw new HttpError('invalid_param', err.message);
  }
  const input = readWebhook(event, body);
  if (input.kind === 'skip') return skipped(input.reason);
  // The event names its repository: only that one, if served, ever takes it.
  const routed = ctx.deps.settings.repos.webhook(input.repository);
  if (routed.kind === 'unserved') return skipped(unserved(ctx, 'webhook', routed.reason));
  const delivery = firstHeader(ctx.req.headers, sourceOf('webhook').delivery)?.trim();
  const keys = [bodyKey('webhook', raw), ...(delivery ? [`webhook:delivery:${delivery.slice(0, 200)}`] : [])];
  const brief = input.brief;
  const repo = routed.repo.name;
  return enqueue(ctx, { origin: 'webhook', repo, dedupeKeys: keys, job: { brief, args: briefPrArgs(brief) } });
}
