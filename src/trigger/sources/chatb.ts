// chatb activities: message text with `<at>…</at>` mentions and every other tag removed (spec "Brief content by
// origin").
import { sanitizeBrief } from '../brief.ts';
import { sourceOf } from '../../webhook-sources.ts';
import { obj, str } from '../../untrusted.ts';

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
