// POST /errtrack: hex HMAC in `errtrack-hook-signature`, then alert → brief → `svc start "<brief>" --pr --detach`.
import { parseJsonObject } from '../../http/body.ts';
import type { Reply } from '../../http/respond.ts';
import { verifyErrtrack } from '../verify.ts';
import { firstHeader, signedHeaders, sourceOf } from '../../webhook-sources.ts';
import { readErrtrackAlert, buildErrtrackBrief } from '../sources/errtrack.ts';
import { errtrackArgs } from '../../spawn/start-argv.ts';
import { bodyKey, enqueue, rawOf, requireValid, secretFor, skipped, unserved, type TCtx } from './common.ts';

export async function receiveErrtrack(ctx: TCtx): Promise<Reply> {
  const secret = secretFor(ctx, 'errtrack');
  const raw = rawOf(ctx);
  // Sentry's own Sentry-Hook-Signature / Sentry-Hook-Resource, or the spec's errtrack-hook-* names.
  const { signature } = signedHeaders(ctx.req.headers, 'errtrack');
  requireValid(ctx, 'errtrack', verifyErrtrack(secret, raw, signature));
  const resource = firstHeader(ctx.req.headers, sourceOf('errtrack').resource);
  const alert = readErrtrackAlert(resource, parseJsonObject(raw));
  if ('skip' in alert) return skipped(alert.skip);
  const routed = ctx.deps.settings.repos.route('errtrack', alert.projectSlug);
  if (routed.kind === 'unserved') return skipped(unserved(ctx, 'errtrack', routed.reason));
  const served = routed.repo;
  // The brief reads the routed checkout's deploy records and runs `git log` there: only after the cheap checks
  // (dedupe, queue share) passed.
  return enqueue(ctx, {
    origin: 'errtrack',
    repo: served.name,
    dedupeKeys: [bodyKey('errtrack', raw), alert.identityKey],
    prepare: async () => {
      const brief = await buildErrtrackBrief(alert, served.checkout);
      return { brief, args: errtrackArgs(brief) };
    },
  });
}
