// POST /chatb (Teams outgoing webhook): the message text without its tags is the brief; answered synchronously, as
// chatb cannot be posted to later.
import { json, type Reply } from '../../http/respond.ts';
import { briefOf } from '../../webhook-sources.ts';
import { obj, str } from '../../untrusted.ts';
import type { Decision, Received, TCtx } from '../intake.ts';
import { chatThread, readChatCommand, type ChatVoice } from './chat.ts';

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', '#39': "'" };

export function chatbText(html: string): string {
  const stripped = html
    .replace(/<at\b[^>]*>[\s\S]*?<\/at>/gi, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/&(amp|lt|gt|quot|apos|nbsp|#39);/g, (_m, name: string) => ENTITIES[name] ?? ' ');
  return briefOf('chatb', stripped);
}

/** Where the message was posted, which routes it (chatb=…): the Teams channel, else the conversation's id. */
function channelOf(body: Record<string, unknown>): string | null {
  const data = obj(body.channelData);
  const conversation = str(obj(body.conversation).id);
  return str(data.teamsChannelId) ?? str(obj(data.channel).id) ?? (conversation ? conversation.split(';')[0]! : null);
}

function userOf(from: Record<string, unknown>): string {
  const name = str(from.name)?.slice(0, 100);
  const id = str(from.id)?.slice(0, 100);
  return name && id ? `${name} (${id})` : id ?? name ?? 'unknown';
}

function readChatb(body: Record<string, unknown>) {
  return {
    id: typeof body.id === 'string' && body.id.length <= 256 ? body.id : null,
    text: typeof body.text === 'string' ? chatbText(body.text) : '',
    channel: channelOf(body),
    /** Who wrote it (the audit of an answer): the name they show, and the account id, which they cannot change. */
    user: userOf(obj(body.from)),
  };
}

function message(text: string, extra: Record<string, unknown> = {}): Reply {
  return json(200, { type: 'message', text, ...extra });
}

const TEAMS: ChatVoice = {
  say: message, noun: 'svc job',
  usage: 'Tell me what to do after the mention, e.g. "fix the flaky login test". Nothing was queued.',
};

export function readChatbDelivery(ctx: TCtx, { body }: Received): Decision {
  const activity = readChatb(body);
  // A message's id is the millisecond it was posted in its channel: two channels can share one.
  const keys = activity.id ? [`chatb:activity:${activity.channel ?? ''}:${activity.id}`] : [];
  // No reply channel (chatb cannot be posted to later): the target only names the thread an answer finds its job by.
  const reply = activity.channel
    ? { channel: 'chatb', target: { thread: chatThread('chatb', activity.channel) } } as const : undefined;
  return readChatCommand(ctx, 'chatb', { ...activity, keys }, TEAMS, {
    reply,
    replies: {
      queued: (id) => message(`Queued svc job ${id}`),
      duplicate: (id) => message(`Already queued as svc job ${id}`, { status: 'duplicate' }),
    },
  });
}
