// POST /chatb: `Authorization: HMAC <base64>` keyed by the decoded token + Activity timestamp within 300 s; the
// message text, `<at>…</at>` mentions and every other tag removed (spec "Brief content by origin") → `svc start
// --brief "<brief>" --pr --detach`, answered synchronously (chatb cannot be posted to later).
import { parseJsonObject } from '../../http/body.ts';
import { json, type Reply } from '../../http/respond.ts';
import { decodeChatbKey, sanitizeBrief, sourceOf } from '../../webhook-sources.ts';
import { obj, str } from '../../untrusted.ts';
import { takeRepoOption } from '../served-repos.ts';
import {
  briefPrArgs, bodyKey, checkChatbTimestamp, enqueue, rawOf, requireValid, secretFor, unserved,
  verifyChatbSignature, type TCtx,
} from '../intake.ts';

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', '#39': "'" };

export function chatbText(html: string): string {
  const stripped = html
    .replace(/<at\b[^>]*>[\s\S]*?<\/at>/gi, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/&(amp|lt|gt|quot|apos|nbsp|#39);/g, (_m, name: string) => ENTITIES[name] ?? ' ');
  return sanitizeBrief(stripped, sourceOf('chatb').briefBytes);
}

export interface ChatbActivity {
  id: string | null;
  timestamp: unknown;
  text: string;
  /** The channel the message was posted in: routes it (chatb=… in the repositories file). */
  channel: string | null;
}

/** `channelData.teamsChannelId`, else `channelData.channel.id`, else the conversation id without its `;messageid=`. */
function channelOf(body: Record<string, unknown>): string | null {
  const data = obj(body.channelData);
  const conversation = str(obj(body.conversation).id);
  return str(data.teamsChannelId) ?? str(obj(data.channel).id) ?? (conversation ? conversation.split(';')[0]! : null);
}

export function readChatb(body: Record<string, unknown>): ChatbActivity {
  return {
    id: typeof body.id === 'string' && body.id.length <= 256 ? body.id : null,
    timestamp: body.timestamp,
    text: typeof body.text === 'string' ? chatbText(body.text) : '',
    channel: channelOf(body),
  };
}

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
  const routed = ctx.deps.settings.repos.chat('chatb', activity.channel, option.repo);
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
