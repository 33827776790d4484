// GET /v1/audit: the audit hash chain, newest first, keyset-paged; `?verify=true` also re-checks the whole chain.
import { json } from '../../http/respond.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';
import { checkQueryKeys, decodeCursor, encodeCursor, invalidParam, parseLimit } from '../params.ts';
import { iso } from '../../iso-time.ts';

function parseVerify(value: string | null): boolean {
  if (value === null || value === 'false' || value === '0') return false;
  if (value === 'true' || value === '1' || value === '') return true;
  invalidParam('Parameter "verify" must be true or false');
}

export const listAudit: Handler<ControlDeps> = (ctx) => {
  checkQueryKeys(ctx.query, ['limit', 'cursor', 'verify']);
  const limit = parseLimit(ctx.query.get('limit'));
  const cursor = ctx.query.get('cursor');
  const verify = parseVerify(ctx.query.get('verify'));
  const audit = ctx.deps.stores.audit;
  const page = audit.list({ limit, beforeId: cursor === null ? null : (decodeCursor(cursor, ['int'])[0] as number) });
  const body: Record<string, unknown> = {
    items: page.items.map((e) => ({ ...e, at: iso(e.at) })),
    next_cursor: page.nextBeforeId === null ? null : encodeCursor([page.nextBeforeId]),
  };
  if (verify) {
    const broken = audit.verifyChain();
    body.chain = { intact: broken === null, first_broken_id: broken };
  }
  return json(200, body);
};
