// POST /chatb: `Authorization: HMAC <base64>` keyed by the decoded token + Activity timestamp within 300 s;
// message → `svc start --brief "<brief>" --pr --detach`, answered synchronously (chatb cannot be posted to later).
import { parseJsonObject } from '../../http/body.ts';
import { json, type Reply } from '../../http/respond.ts';
import { verifyChatbSignature, checkChatbTimestamp, decodeChatbKey } from '../verify.ts';
import { readChatb } from '../sources/chatb.ts';
import { briefPrArgs } from '../args.ts';
import { routeChat, takeRepoOption } from '../sources/repo-option.ts';
import { bodyKey, enqueue, rawOf, requireValid, secretFor, unserved, type TCtx } from './common.ts';

function message(text: string, extra: Record<string, unknown> = {}): Reply {
  return json(200, { type: 'message', text, ...extra });
}

const USAGE = 'Tell me what to do after the mention, e.g. "fix the flaky login test". Nothing was queued.';

export async function receiveChatb(ctx: TCtx): Promise<Reply> {
  const key = decodeChatbKey(secretFor(ctx, 'chatb'))!;
  const raw = rawOf(ctx);
  requireValid(ctx, 'chatb', verifyChatbSignature(key, raw, ctx.req.headers.authorization));
  const activity = readChatb(parseJsonObject(raw));
  requireValid(ctx, 'chatb', checkChatbTimestamp(activity.timestamp, ctx.deps.clock()));
  const option = takeRepoOption(activity.text);
  if (option.kind === 'bad') return message(`${option.reason}. Nothing was queued.`);
  if (option.text === '') return message(USAGE);
  const routed = routeChat(ctx.deps.settings.repos, 'chatb', activity.channel, option.repo);
  if (routed.kind === 'unserved') {
    const reason = unserved(ctx, 'chatb', routed.reason);
    return message(`Not queued: ${reason}.`, { status: 'skipped', reason });
  }
  const keys = [bodyKey('chatb', raw), ...(activity.id ? [`chatb:activity:${activity.id}`] : [])];
  const job = { brief: option.text, args: briefPrArgs(option.text) };
  return enqueue(
    ctx,
    { origin: 'chatb', repo: routed.repo.name, dedupeKeys: keys, job },
    {
      queued: (id) => message(`Queued svc job ${id}`),
      duplicate: (id) => message(`Already queued as svc job ${id}`, { status: 'duplicate' }),
    },
  );
}
