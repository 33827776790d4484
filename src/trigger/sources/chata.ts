// POST /chata (Slack): a slash command (form body) becomes a job, url_verification is answered its challenge; the
// summary goes back to the command's response_url in mrkdwn (docs/trigger.md "Completion summaries").
import { parseJsonObject } from '../../http/body.ts';
import { json, type Reply } from '../../http/respond.ts';
import { describe } from '../../untrusted.ts';
import { sanitizeBrief, sourceOf } from '../../webhook-sources.ts';
import { renderSummary, type Piece, type ReplyChannel } from '../summary.ts';
import { takeRepoOption } from '../served-repos.ts';
import { enqueue, skipped, unserved, type TCtx } from '../intake.ts';

export type ChataInput =
  | { kind: 'command'; text: string; responseUrl: string | null; channel: string | null }
  | { kind: 'challenge'; challenge: string }
  | { kind: 'skip'; reason: string };

/** Slash-command text as an argv element: one line, leading hyphens stripped so it is never an option (spec rule 1). */
export function chataText(raw: string): string {
  return sanitizeBrief(raw, sourceOf('chata').briefBytes);
}

export function readChata(contentType: string, raw: Buffer): ChataInput {
  if (contentType === 'application/json') {
    const body = parseJsonObject(raw);
    if (body.type === 'url_verification' && typeof body.challenge === 'string') {
      return { kind: 'challenge', challenge: body.challenge.slice(0, 512) };
    }
    return { kind: 'skip', reason: `event type "${describe(body.type)}" does not start a job` };
  }
  const form = new URLSearchParams(raw.toString('utf8'));
  if (form.has('ssl_check')) return { kind: 'skip', reason: 'ssl_check' };
  const text = chataText(form.get('text') ?? '');
  return { kind: 'command', text, responseUrl: form.get('response_url'), channel: form.get('channel_id') || null };
}

const CHATA_USAGE = 'Usage: /svc <what to do>, e.g. /svc fix the flaky login test. Nothing was queued.';

// A percent-encoded dot, slash or backslash: the receiving server may decode it into a path step our parser kept.
const ENCODED_PATH_STEP = /%(2e|2f|5c)/i;

/**
 * True only for an https URL under the hooks prefix at a path boundary, as the WHATWG parser writes it back, without
 * encoded path steps: anything parsing would change is refused, not repaired (docs/trigger.md "Reply URLs").
 */
export function isAllowedChataUrl(value: unknown, prefix: string): value is string {
  if (typeof value !== 'string' || value.length > 2048 || !prefix.startsWith('https://')) return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.href !== value || url.protocol !== 'https:' || url.username !== '' || url.password !== '') return false;
  if (ENCODED_PATH_STEP.test(url.pathname) || !value.startsWith(prefix)) return false;
  return prefix.endsWith('/') || value.length === prefix.length || '/?#'.includes(value[prefix.length]!);
}

function ephemeral(text: string, extra: Record<string, unknown> = {}): Reply {
  return json(200, { response_type: 'ephemeral', text, ...extra });
}

function notQueued(reason: string): Reply {
  return ephemeral(`Not queued: ${reason}.`, { status: 'skipped', reason });
}

export async function receiveChata(ctx: TCtx, raw: Buffer): Promise<Reply> {
  const input = readChata((ctx.req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase(), raw);
  if (input.kind === 'challenge') return json(200, { challenge: input.challenge });
  if (input.kind === 'skip') return skipped(input.reason);
  const option = takeRepoOption(input.text);
  if (option.kind === 'bad') return ephemeral(`${option.reason}. Nothing was queued.`);
  if (option.text === '') return ephemeral(CHATA_USAGE);
  const routed = ctx.deps.settings.repos.chat('chata', input.channel, option.repo);
  if (routed.kind === 'unserved') return unserved(ctx, 'chata', routed.reason, notQueued);
  // Reply target captured only after verification, and only for an https URL under the hooks prefix (spec).
  const prefix = ctx.deps.settings.notify.chataHooksPrefix;
  const reply = isAllowedChataUrl(input.responseUrl, prefix)
    ? { channel: 'chata', target: { response_url: input.responseUrl } }
    : undefined;
  if (!reply && input.responseUrl) {
    // Not under the prefix, or not as it reads once normalised (above): the job runs, no summary goes.
    ctx.deps.log.warn('chata response_url ignored: not under CHATA_HOOKS_PREFIX', { request_id: ctx.requestId });
  }
  return enqueue(
    ctx,
    { origin: 'chata', repo: routed.repo.name, reply, brief: option.text },
    {
      queued: (id) => ephemeral(`Queued job ${id}. You will get a summary here when its run ends.`),
      duplicate: (id) => ephemeral(`Already queued as job ${id}.`, { status: 'duplicate' }),
    },
  );
}

function slackEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function slackPiece(piece: Piece): string {
  if ('own' in piece) return slackEscape(piece.own);
  if ('link' in piece) return `<${slackEscape(piece.link)}>`;
  if (piece.data === '') return '';
  // mrkdwn has no escape for a backtick inside code: a look-alike keeps the span closed where we close it.
  return `\`${slackEscape(piece.data.replace(/`/g, 'ˋ'))}\``;
}

export const chataReply: ReplyChannel = {
  configured: (config) => config.chataHooksPrefix !== '',
  prepare(target, parts, config) {
    if (!isAllowedChataUrl(target.response_url, config.chataHooksPrefix)) {
      return 'response_url is not under CHATA_HOOKS_PREFIX';
    }
    const text = renderSummary(parts, slackPiece);
    const body = JSON.stringify({ response_type: 'ephemeral', replace_original: false, text });
    return { url: new URL(target.response_url), headers: {}, body, what: 'chata response_url' };
  },
};
