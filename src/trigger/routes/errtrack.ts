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
  // The brief reads deploy records and runs `git log`: only after the cheap checks (dedupe, queue share) passed.
  return enqueue(ctx, {
    origin: 'errtrack',
    dedupeKeys: [bodyKey('errtrack', raw), alert.identityKey],
    prepare: async () => {
      const brief = await buildErrtrackBrief(alert, ctx.deps.settings.repoDir);
      return { brief, args: errtrackArgs(brief) };
    },
  });
}
