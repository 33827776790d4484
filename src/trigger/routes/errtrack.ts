// POST /errtrack: hex HMAC in `errtrack-hook-signature`, then alert → brief → `svc start "<brief>" --pr --detach`.
import { parseJsonObject } from '../../http/body.ts';
import type { Reply } from '../../http/respond.ts';
import { verifyErrtrack } from '../verify.ts';
import { readErrtrackAlert, buildErrtrackBrief } from '../sources/errtrack.ts';
import { errtrackArgs } from '../args.ts';
import { bodyKey, enqueue, header, rawOf, requireValid, secretFor, skipped, type TCtx } from './common.ts';

export async function receiveErrtrack(ctx: TCtx): Promise<Reply> {
  const secret = secretFor(ctx, 'errtrack');
  const raw = rawOf(ctx);
  requireValid(ctx, 'errtrack', verifyErrtrack(secret, raw, ctx.req.headers['errtrack-hook-signature']));
  const alert = readErrtrackAlert(header(ctx, 'errtrack-hook-resource'), parseJsonObject(raw));
  if ('skip' in alert) return skipped(alert.skip);
  const brief = await buildErrtrackBrief(alert, ctx.deps.settings.repoDir);
  return enqueue(ctx, { origin: 'errtrack', brief, args: errtrackArgs(brief), dedupeKeys: [bodyKey('errtrack', raw), alert.identityKey] });
}
