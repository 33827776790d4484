// POST /chatb (Teams outgoing webhook): the message text without its tags is the brief; answered synchronously, as
// chatb cannot be posted to later.
import { parseJsonObject } from '../../http/body.ts';
import { json, type Reply } from '../../http/respond.ts';
import { sanitizeBrief, sourceOf } from '../../webhook-sources.ts';
import { obj, str } from '../../untrusted.ts';
import { takeRepoOption } from '../served-repos.ts';
import { checkBodyTime, enqueue, requireValid, unserved, type TCtx } from '../intake.ts';
import { answerCommand } from '../answers.ts';
import { ANSWER_COMMAND } from '../summary.ts';
import type { JobRow } from '../../db/trigger-jobs-store.ts';
import { createHash } from 'node:crypto';

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
function userOf(from: Record<string, unknown>): string {
  const name = str(from.name)?.slice(0, 100);
  const id = str(from.id)?.slice(0, 100);
  return name && id ? `${name} (${id})` : id ?? name ?? 'unknown';
}

export function readChatb(body: Record<string, unknown>) {
  return {
    id: typeof body.id === 'string' && body.id.length <= 256 ? body.id : null,
    timestamp: body.timestamp,
    text: typeof body.text === 'string' ? chatbText(body.text) : '',
    channel: channelOf(body),
    /** Who wrote it (the audit of an answer): the name they show, and the account id, which they cannot change. */
    user: userOf(obj(body.from)),
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
  if (/^answer(\s|$)/i.test(activity.text)) return answerFromChatb(ctx, activity);
  const option = takeRepoOption(activity.text);
  if (option.kind === 'bad') return message(`${option.reason}. Nothing was queued.`);
  if (option.text === '') return message(USAGE);
  const routed = ctx.deps.settings.repos.chat('chatb', activity.channel, option.repo);
  if (routed.kind === 'unserved') return unserved(ctx, 'chatb', routed.reason, notQueued);
  const keys = activity.id ? [`chatb:activity:${activity.id}`] : [];
  // No reply channel (chatb cannot be posted to later): the target only names the thread an answer finds its job by.
  const reply = activity.channel ? { channel: 'chatb', target: { thread: chatbThread(activity.channel) } } : undefined;
  return enqueue(
    ctx,
    { origin: 'chatb', repo: routed.repo.name, keys, brief: option.text, reply },
    {
      queued: (id) => message(`Queued svc job ${id}`),
      duplicate: (id) => message(`Already queued as svc job ${id}`, { status: 'duplicate' }),
    },
  );
}

function chatbThread(channel: string): string {
  return `chatb:${channel}`;
}

/**
 * `@svc answer [<job id>] <text>` in the channel a job was asked in answers its run, as chata's `/svc answer` does
 * (the channel's mapping is the permission); the only reply there can be is this message's own.
 */
async function answerFromChatb(ctx: TCtx, activity: ReturnType<typeof readChatb>): Promise<Reply> {
  const words = activity.text.replace(/^answer\s*/i, '');
  const { jobId, text } = answerCommand(`${ANSWER_COMMAND} ${words}`) ?? { jobId: undefined, text: '' };
  const channel = activity.channel ?? '';
  const refusal = (job: JobRow): string | null => {
    const routed = ctx.deps.settings.repos.chat('chatb', activity.channel, job.repo);
    return routed.kind === 'unserved' ? routed.reason : null;
  };
  const outcome = await ctx.deps.answers.answer({
    origin: 'chatb', thread: chatbThread(channel), jobId, text, who: activity.user, refusal,
    place: `chatb channel ${channel}`,
    keys: [`chatb:body:${createHash('sha256').update(ctx.raw ?? '').digest('hex')}`,
      ...(activity.id ? [`chatb:activity:${activity.id}`] : [])],
  });
  if (outcome.kind === 'no_job') return message(`Not answered: ${outcome.reason}.`, { status: 'skipped' });
  if (outcome.kind === 'duplicate') return message('Already answered.', { status: 'duplicate' });
  if (outcome.kind === 'answered') {
    return message(`Answered svc job ${outcome.jobId}; it continues.`, { status: 'answered' });
  }
  return message(`Not answered (svc job ${outcome.jobId}): ${outcome.reason}.`, { status: 'refused' });
}
