// POST /chata (Slack): a slash command (form body) becomes a job, url_verification is answered its challenge, a reply
// in a question's thread answers it; the summary goes back to the command's response_url in mrkdwn.
import { json, type Reply } from '../../http/respond.ts';
import { describe, list, obj, objOrNull, str, tryParseJson } from '../../untrusted.ts';
import { briefOf, deliveryKeys, stripLeadingHyphens } from '../../webhook-sources.ts';
import {
  PermanentError, renderSummary, type Delivery, type NotifyConfig, type Piece, type ReplyChannel, type SummaryParts,
} from '../summary.ts';
import { pinnedIn, secretFor, type Decision, type Received, type TCtx } from '../intake.ts';
import { chatRefusal, chatThread, readChatCommand, type ChatVoice } from './chat.ts';

type ChataInput =
  | {
    kind: 'command'; text: string; responseUrl: string | null; channel: string | null; user: string; stranger: boolean;
  }
  | { kind: 'challenge'; challenge: string }
  | { kind: 'reply'; channel: string; thread: string; user: string; text: string; eventId: string | null }
  | { kind: 'skip'; reason: string }
  | { kind: 'refused'; reason: string };

/** A slash command comes as a form, the Events API's deliveries as JSON; `teams`: CHATA_TEAM_IDS (T…, E… ids). */
function readChataBody({ body, form }: Received, teams: ReadonlySet<string>): ChataInput {
  if (form === null) {
    if (body.type === 'url_verification' && typeof body.challenge === 'string') {
      return { kind: 'challenge', challenge: body.challenge.slice(0, 512) };
    }
    if (body.type === 'event_callback') return readThreadReply(body, teams);
    return { kind: 'skip', reason: `event type "${describe(body.type)}" does not start a job` };
  }
  if (form.has('ssl_check')) return { kind: 'skip', reason: 'ssl_check' };
  // Slack Connect shares no slash command: a person runs their own workspace's, whose id is the command's `team_id`.
  const home = form.get('team_id');
  const refusal = workspaceRefusal(home, null);
  if (refusal !== null) return { kind: 'refused', reason: refusal };
  // Slash-command text as an argv element (spec rule 1), in the words the person typed.
  const text = briefOf('chata', slackUnescape(form.get('text') ?? ''));
  const user = (form.get('user_id') || 'unknown').slice(0, 64);
  const channel = form.get('channel_id') || null;
  // A workspace the operator did not name: its channels reach no repository, whatever their ids are mapped to here.
  const stranger = !servesWorkspace(teams, home, form.get('enterprise_id'));
  return { kind: 'command', text, responseUrl: form.get('response_url'), channel, user, stranger };
}

/** The workspace rule of every chata delivery that acts (a command, a thread reply): it names the workspace Slack sent
 * it for (`team_id`), and the person's own team, where Slack names one, is that workspace. Why not, or null. */
function workspaceRefusal(home: string | null, team: string | null): string | null {
  if (!home) return 'a delivery that names no workspace';
  return team !== null && team !== home ? 'a message from another workspace' : null;
}

/**
 * Whether CHATA_TEAM_IDS names the workspace (`team`, a T… entry) or, on Enterprise Grid, the organisation it
 * belongs to (`enterprise`, an E… entry). Both come from the signed body: a header or the URL would let anyone name
 * them. Each id is looked up only among entries of its own kind: a body's odd `team_id` never passes as an E… one.
 */
function servesWorkspace(teams: ReadonlySet<string>, team: string | null, enterprise: string | null): boolean {
  return pinnedIn(teams, team?.startsWith('T') ? team : null, enterprise?.startsWith('E') ? enterprise : null);
}

/** Slack's message timestamp, also the message's id in its channel ("1503435956.000247"). */
const MESSAGE_TS = /^\d{1,12}\.\d{1,9}$/;

/**
 * An Events API `message` in a thread, by a person: not a bot's, not an edit, not the thread's parent. A reply also
 * sent to the channel ("Also send to #channel", subtype `thread_broadcast`) is still a person's reply in the thread.
 */
function readThreadReply(body: Record<string, unknown>, teams: ReadonlySet<string>): ChataInput {
  const event = obj(body.event);
  const [channel, user, ts, thread] = [event.channel, event.user, event.ts, event.thread_ts].map(str);
  const skip = (reason: string): ChataInput => ({ kind: 'skip', reason });
  if (event.type !== 'message') return skip(`event "${describe(event.type)}" is not a message`);
  const subtype = event.subtype === 'thread_broadcast' ? undefined : event.subtype;
  if (event.bot_id !== undefined || subtype !== undefined) return skip('a bot\'s message or an edit');
  if (!thread || !MESSAGE_TS.test(thread) || thread === ts) return skip('a message not in a thread');
  if (!channel || !user || channel.length > 64 || user.length > 64) return skip('a message without channel or user');
  // A channel shared with another workspace (Slack Connect) carries its people's messages too: not answers. In one that
  // workspace started, the envelope's `team_id` is theirs; `authorizations[0]` names where the app is installed
  // (bolt-js reads an event's workspace so too). The organisation is read beside the workspace it was taken with: the
  // envelope's, in a channel another organisation shares with us, is the one that started it.
  const authorization = obj(list(body.authorizations)[0]);
  const from = str(authorization.team_id) ? authorization : body;
  const installed = str(from.team_id);
  const refusal = workspaceRefusal(installed, str(event.user_team) ?? str(event.team));
  if (refusal !== null) return skip(refusal);
  const served = servesWorkspace(teams, installed, str(from.enterprise_id));
  if (!served) return skip('a message from a workspace not served here');
  const text = slackUnescape(str(event.text) ?? '');
  const id = str(body.event_id);
  return { kind: 'reply', channel, thread, user, text, eventId: id && id.length <= 64 ? id : null };
}

const CHATA_USAGE = 'Usage: /svc <what to do>, e.g. /svc fix the flaky login test. Nothing was queued.';

// A percent-encoded dot, slash or backslash: the receiving server may decode it into a path step our parser kept.
const ENCODED_PATH_STEP = /%(2e|2f|5c)/i;

/** An https URL under the hooks prefix at a path boundary, unchanged by parsing (docs/trigger.md "Reply URLs"). */
export function isAllowedChataUrl(value: unknown, prefix: string): value is string {
  if (typeof value !== 'string' || value.length > 2048 || !prefix.startsWith('https://')) return false;
  const url = URL.parse(value);
  if (!url || url.href !== value || url.protocol !== 'https:' || url.username || url.password) return false;
  if (ENCODED_PATH_STEP.test(url.pathname) || !value.startsWith(prefix)) return false;
  return prefix.endsWith('/') || value.length === prefix.length || '/?#'.includes(value[prefix.length]!);
}

function ephemeral(text: string, extra: Record<string, unknown> = {}): Reply {
  return json(200, { response_type: 'ephemeral', text, ...extra });
}

const SLACK: ChatVoice = { say: ephemeral, noun: 'job', usage: CHATA_USAGE, escape: slackEscape };

export function readChata(ctx: TCtx, received: Received): Decision {
  const input = readChataBody(received, ctx.deps.settings.orgs.chata);
  if (input.kind === 'challenge') return { kind: 'reply', reply: json(200, { challenge: input.challenge }) };
  // Without CHATA_TEAM_IDS only the challenge above is answered: everything else is 503 not_configured.
  secretFor(ctx, 'chata');
  if (input.kind === 'skip') return input;
  if (input.kind === 'refused') {
    const reply = ephemeral(`Not queued or answered: ${input.reason}.`, { status: 'skipped', reason: input.reason });
    return { kind: 'reply', reply };
  }
  if (input.kind === 'reply') return { kind: 'reply', reply: answerFromThread(ctx, input) };
  const prefix = ctx.deps.settings.notify.chataHooksPrefix;
  // The channel lets a later question reach it once the response_url expired, and an answer there find its job.
  const thread = input.channel ? { channel_id: input.channel, thread: chatThread('chata', input.channel) } : {};
  const until = ctx.deps.clock() + RESPONSE_URL_MS;
  const reply = isAllowedChataUrl(input.responseUrl, prefix)
    ? { channel: 'chata', target: { response_url: input.responseUrl, response_url_until: until, ...thread } } as const
    : undefined;
  return readChatCommand(ctx, 'chata', { ...input, keys: [] }, SLACK, {
    reply,
    replies: {
      queued: (id) => {
        // The job runs, but its summary has nowhere to go: said once a job is queued, not for a usage reply or a skip.
        if (!reply && input.responseUrl) {
          ctx.deps.log.warn('chata response_url ignored: not under CHATA_HOOKS_PREFIX',
            { request_id: ctx.requestId, job_id: id });
        }
        return ephemeral(`Queued job ${id}. You will get a summary here when its run ends.`);
      },
      duplicate: (id) => ephemeral(`Already queued as job ${id}.`, { status: 'duplicate' }),
    },
  });
}

const UNESCAPED: Record<string, string> = { amp: '&', lt: '<', gt: '>' };

/** Slack escapes these three in what people write (a slash command's `text`, a message's): the run reads their words.
 * Its `<url|label>` and `<@U…|name>` markup is left as sent (docs/trigger.md "Briefs"). */
function slackUnescape(text: string): string {
  return text.replace(/&(amp|lt|gt);/g, (_entity, name: string) => UNESCAPED[name]!);
}

function slackEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function slackPiece(piece: Piece): string {
  if ('own' in piece) return slackEscape(piece.own);
  if ('link' in piece) return `<${slackEscape(piece.link)}>`;
  if (piece.data === '') return '';
  // mrkdwn has no escape for a backtick inside code: a look-alike keeps the span closed.
  return `\`${slackEscape(piece.data.replace(/`/g, 'ˋ'))}\``;
}

/** A response_url takes at most 5 posts within 30 minutes of its command (vendor-webhooks.md §1.1). */
const RESPONSE_URL_MS = 30 * 60_000;
const RESPONSE_URL_POSTS = 5;

/** A bot-token post (chat.postMessage); a question's `ts` is kept, so a reply in its thread answers it. */
function botPost(
  target: Record<string, unknown>, text: string, config: NotifyConfig, asks = false,
): Delivery | string {
  const bot = config.chataBot;
  if (!bot) return 'the response_url expired and CHATA_BOT_TOKEN is not set';
  if (typeof target.channel_id !== 'string') return 'the response_url expired and the job has no channel';
  return {
    url: new URL('chat.postMessage', bot.apiUrl.endsWith('/') ? bot.apiUrl : `${bot.apiUrl}/`),
    headers: { authorization: `Bearer ${bot.token}` },
    body: JSON.stringify({ channel: target.channel_id, text }),
    what: 'chata API',
    check(answer) {
      // The Web API answers 200 with {"ok":false,"error"} when it refuses. A 2xx that says nothing readable may
      // still have posted the message: no retry either, and the log says which.
      const parsed = objOrNull(tryParseJson(answer));
      if (!parsed) throw new PermanentError('chata API answered with something that is not a JSON object');
      if (parsed.ok !== true) throw new PermanentError('chata API refused the message');
    },
    ...(asks ? {
      remember(answer: string) {
        const ts = str(obj(tryParseJson(answer)).ts);
        return ts && MESSAGE_TS.test(ts) ? { question_message: ts } : null;
      },
    } : {}),
  };
}

/** A reply in the thread of a job's question: its answer, by the rules of `answer` in the channel. */
async function answerFromThread(ctx: TCtx, m: Extract<ChataInput, { kind: 'reply' }>): Promise<Reply> {
  return ctx.deps.answers.reply({
    origin: 'chata', thread: chatThread('chata', m.channel), replyTo: m.thread, who: m.user,
    text: stripLeadingHyphens(m.text).trim(), refusal: chatRefusal(ctx, 'chata', m.channel),
    place: `chata channel ${m.channel} thread ${m.thread}`,
    keys: deliveryKeys('chata', ctx.req.headers, ctx.raw, ...(m.eventId ? [`chata:event:${m.eventId}`] : [])),
  });
}

export const chataReply: ReplyChannel = {
  configured: (config) => config.chataHooksPrefix !== '',
  ask(target, parts, config, now) {
    // Only the bot's message has a thread to reply in (a response_url's is ephemeral).
    const bot = config.chataBot && typeof target.channel_id === 'string';
    if (!bot) return chataReply.prepare(target, parts, config, now);
    const thread: SummaryParts = [...parts, [{ own: 'or reply in this thread' }]];
    return botPost(target, renderSummary(thread, slackPiece), config, true);
  },
  prepare(target, parts, config, now) {
    const until = target.response_url_until;
    const posts = typeof target.response_url_posts === 'number' ? target.response_url_posts : 0;
    if ((typeof until === 'number' && now > until) || posts >= RESPONSE_URL_POSTS) {
      return botPost(target, renderSummary(parts, slackPiece), config);
    }
    if (!isAllowedChataUrl(target.response_url, config.chataHooksPrefix)) {
      return 'response_url is not under CHATA_HOOKS_PREFIX';
    }
    const text = renderSummary(parts, slackPiece);
    const body = JSON.stringify({ response_type: 'ephemeral', replace_original: false, text });
    return {
      url: new URL(target.response_url), headers: {}, body, what: 'chata response_url',
      remember: () => ({ response_url_posts: posts + 1 }),
    };
  },
};
