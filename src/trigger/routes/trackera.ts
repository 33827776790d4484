// POST /trackera: hex HMAC of the body + signed webhookTimestamp within 300 s; issue events → `svc start trackera:<id>
// --detach`.
import { parseJsonObject } from '../../http/body.ts';
import { json, type Reply } from '../../http/respond.ts';
import { verifyTrackeraSignature, checkTrackeraTimestamp } from '../verify.ts';
import { signedHeaders } from '../../webhook-sources.ts';
import { readTrackera } from '../sources/trackera.ts';
import { stageTrackeraSnapshot, type StagedSnapshot } from '../trackera-snapshot.ts';
import { trackeraArgs } from '../../spawn/start-argv.ts';
import { intakeDir } from '../repo-dirs.ts';
import { bodyKey, enqueue, rawOf, requireValid, secretFor, skipped, unserved, type TCtx } from './common.ts';

export async function receiveTrackera(ctx: TCtx): Promise<Reply> {
  const secret = secretFor(ctx, 'trackera');
  const raw = rawOf(ctx);
  // Linear's own Linear-Signature, or the spec's TRACKERA-Signature.
  const { signature } = signedHeaders(ctx.req.headers, 'trackera');
  requireValid(ctx, 'trackera', verifyTrackeraSignature(secret, raw, signature));
  const body = parseJsonObject(raw);
  requireValid(ctx, 'trackera', checkTrackeraTimestamp(body.webhookTimestamp, ctx.deps.clock()));
  const input = readTrackera(body);
  if (input.kind === 'skip') return skipped(input.reason);
  const routed = ctx.deps.settings.repos.route('trackera', input.teamKey);
  if (routed.kind === 'unserved') return skipped(unserved(ctx, 'trackera', routed.reason));
  const inbox = intakeDir(ctx.deps.settings.stateDir, routed.repo);
  // Staged (a file write) only once the cheap checks passed, before the commit; put in place in the same turn the
  // job commits (before the job loop can launch it).
  const identifier = input.identifier;
  let snapshot: StagedSnapshot | undefined;
  try {
    return await enqueue(
      ctx,
      {
        origin: 'trackera',
        repo: routed.repo.name,
        dedupeKeys: [bodyKey('trackera', raw)],
        reply: { channel: 'trackera', target: { issue_id: input.issueId, identifier } },
        prepare: async () => {
          snapshot = await stageTrackeraSnapshot(inbox, identifier, raw);
          return { brief: `trackera:${identifier}`, args: trackeraArgs(identifier) };
        },
      },
      {
        queued: (jobId) => {
          try {
            snapshot?.keep(jobId);
          } catch (err) {
            // The job is committed: its run falls back to the newest snapshot or the tracker API (docs/trigger.md).
            const error = err instanceof Error ? err.message : 'unknown';
            ctx.deps.log.warn('trackera snapshot not kept', { job_id: jobId, error });
          }
          return json(202, { job_id: jobId, status: 'queued' });
        },
      },
    );
  } finally {
    await snapshot?.discard();
  }
}
