// What both chats (chata, chatb) do alike: a message's repository, and `answer` in a channel a job was asked in.
import type { Reply } from '../../http/respond.ts';
import { deliveryKeys, type ChatKind } from '../../webhook-sources.ts';
import { ANSWER_COMMAND } from '../summary.ts';
import { answerCommand } from '../answers.ts';
import type { JobRow } from '../../db/trigger-jobs-store.ts';
import { takeRepoOption } from '../served-repos.ts';
import type { Decision, Job, TCtx } from '../intake.ts';

/** A chat message as both chats read it; `keys` are its dedupe keys besides the delivery's own. */
interface ChatMessage {
  text: string;
  channel: string | null;
  user: string;
  keys: string[];
  /** Sent from a workspace the operator did not name (chata's CHATA_TEAM_IDS): its channel reaches no repository. */
  stranger?: boolean;
}

/** How a chat answers in the message's own reply: `noun` names a job ("job", "svc job"), `escape` the vendor's. */
export interface ChatVoice {
  say: (text: string, extra?: Record<string, unknown>) => Reply;
  noun: string;
  usage: string;
  escape?: (text: string) => string;
}

/** A chat command's own reply, or its job in the message's channel (`repo=owner/name` picks among the channel's). */
export function readChatCommand(
  ctx: TCtx, kind: ChatKind, m: ChatMessage, voice: ChatVoice, job: Omit<Job, 'kind' | 'text' | 'route'>,
): Decision {
  if (/^answer(\s|$)/i.test(m.text)) return { kind: 'reply', reply: answerFromChat(ctx, kind, m, voice) };
  const option = takeRepoOption(m.text);
  const { escape = (t: string) => t } = voice;
  const say = (text: string): Decision => ({ kind: 'reply', reply: voice.say(text) });
  // The reason quotes the person's own `repo=` word: escaped like any text a chat shows back.
  if (option.kind === 'bad') return say(`${escape(option.reason)}. Nothing was queued.`);
  if (option.text === '') return say(voice.usage);
  const unserved = (reason: string) => voice.say(`Not queued: ${reason}.`, { status: 'skipped', reason });
  return {
    kind: 'job', text: option.text, route: m.channel, pick: option.repo, stranger: m.stranger, keys: m.keys, unserved,
    ...job,
  };
}

/** The conversation an answer in a chat channel finds its job by. */
export function chatThread(kind: ChatKind, channel: string): string {
  return `${kind}:${channel}`;
}

/** A chat's answer is refused unless its channel is still mapped to the job's repository (the permission to answer). */
export function chatRefusal(
  ctx: TCtx, kind: ChatKind, channel: string | null, stranger = false,
): (job: JobRow) => string | null {
  return (job) => {
    const routed = ctx.deps.settings.repos.chat(kind, channel, job.repo, stranger);
    return routed.kind === 'unserved' ? routed.reason : null;
  };
}

/** `answer [<job id>] <text>` in the channel a job was asked in; told at once, in the chat message's one reply. */
async function answerFromChat(ctx: TCtx, kind: ChatKind, m: ChatMessage, voice: ChatVoice): Promise<Reply> {
  const words = m.text.replace(/^answer\s*/i, '');
  const { jobId, text } = answerCommand(`${ANSWER_COMMAND} ${words}`) ?? { jobId: undefined, text: '' };
  const channel = m.channel ?? '';
  const outcome = await ctx.deps.answers.answer({
    origin: kind, thread: chatThread(kind, channel), jobId, text, who: m.user,
    refusal: chatRefusal(ctx, kind, m.channel, m.stranger), place: `${kind} channel ${channel}`,
    keys: deliveryKeys(kind, ctx.req.headers, ctx.raw, ...m.keys),
  });
  const { say, noun, escape = (t: string) => t } = voice;
  if (outcome.kind === 'no_job') return say(`Not answered: ${outcome.reason}.`, { status: 'skipped' });
  if (outcome.kind === 'duplicate') return say('Already answered.', { status: 'duplicate' });
  if (outcome.kind === 'answered') {
    return say(`Answered ${noun} ${outcome.jobId} (run ${outcome.run}); it continues.`, { status: 'answered' });
  }
  return say(`Not answered (${noun} ${outcome.jobId}): ${escape(outcome.reason)}.`, { status: 'refused' });
}
