// POST /chatb (Teams outgoing webhook): the message text without its tags is the brief; answered synchronously, as
// chatb cannot be posted to later.
import { parseJsonObject } from '../../http/body.ts';
import { json, type Reply } from '../../http/respond.ts';
import { sanitizeBrief, sourceOf } from '../../webhook-sources.ts';
import { obj, str } from '../../untrusted.ts';
import { takeRepoOption } from '../served-repos.ts';
import { checkBodyTime, enqueue, requireValid, unserved, type TCtx } from '../intake.ts';

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', '#39': "'" };

export function chatbText(html: string): string {
  const stripped = html
    .replace(/<at\b[^>]*>[\s\S]*?<\/at>/gi, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/&(amp|lt|gt|quot|apos|nbsp|#39);/g, (_m, name: string) => ENTITIES[name] ?? ' ');
  return sanitizeBrief(stripped, sourceOf('chatb').briefBytes);
}

/** `channelData.teamsChannelId`, else `channelData.channel.id`, else the conversation id without its `;messageid=`. */
function channelOf(body: Record<string, unknown>): string | null {
  const data = obj(body.channelData);
  const conversation = str(obj(body.conversation).id);
  return str(data.teamsChannelId) ?? str(obj(data.channel).id) ?? (conversation ? conversation.split(';')[0]! : null);
}

/** The activity's `channel` (where the message was posted) routes it: chatb=… in the repositories file. */
export function readChatb(body: Record<string, unknown>) {
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

function notQueued(reason: string): Reply {
  return message(`Not queued: ${reason}.`, { status: 'skipped', reason });
}

const USAGE = 'Tell me what to do after the mention, e.g. "fix the flaky login test". Nothing was queued.';

export async function receiveChatb(ctx: TCtx, raw: Buffer): Promise<Reply> {
  const activity = readChatb(parseJsonObject(raw));
  requireValid(ctx, 'chatb', checkBodyTime('iso', activity.timestamp, ctx.deps.clock()));
  const option = takeRepoOption(activity.text);
  if (option.kind === 'bad') return message(`${option.reason}. Nothing was queued.`);
  if (option.text === '') return message(USAGE);
  const routed = ctx.deps.settings.repos.chat('chatb', activity.channel, option.repo);
  if (routed.kind === 'unserved') return unserved(ctx, 'chatb', routed.reason, notQueued);
  const keys = activity.id ? [`chatb:activity:${activity.id}`] : [];
  return enqueue(
    ctx,
    { origin: 'chatb', repo: routed.repo.name, keys, brief: option.text },
    {
      queued: (id) => message(`Queued svc job ${id}`),
      duplicate: (id) => message(`Already queued as svc job ${id}`, { status: 'duplicate' }),
    },
  );
}
