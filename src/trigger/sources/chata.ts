// POST /chata: `v0=` signature over `v0:<ts>:<body>`; a slash command (form body) → `svc start <text> --detach`;
// url_verification → the challenge. The summary goes back to the command's response_url in Slack-like mrkdwn: `&`,
// `<`, `>` escaped everywhere (the vendor's own rule: `<!here>`, `<@U…>` and `<url|text>` need a raw `<`), and agent
// text in an inline code span (no auto-link, no bold), backticks swapped.
import { parseJsonObject } from '../../http/body.ts';
import { json, type Reply } from '../../http/respond.ts';
import { describe } from '../../untrusted.ts';
import { sanitizeBrief, sourceOf } from '../../webhook-sources.ts';
import { renderSummary, type Piece, type ReplyChannel } from '../summary.ts';
import { takeRepoOption } from '../served-repos.ts';
import { enqueue, mediaType, skipped, unserved, type TCtx } from '../intake.ts';

export type ChataInput =
  | { kind: 'command'; text: string; responseUrl: string | null; user: string | null; channel: string | null }
  | { kind: 'challenge'; challenge: string }
  | { kind: 'skip'; reason: string; eventId: string | null };

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
    const eventId = typeof body.event_id === 'string' ? body.event_id : null;
    return { kind: 'skip', reason: `event type "${describe(body.type)}" does not start a job`, eventId };
  }
  const form = new URLSearchParams(raw.toString('utf8'));
  if (form.has('ssl_check')) return { kind: 'skip', reason: 'ssl_check', eventId: null };
  return {
    kind: 'command',
    text: chataText(form.get('text') ?? ''),
    responseUrl: form.get('response_url'),
    user: form.get('user_id'),
    channel: form.get('channel_id') || null,
  };
}

const CHATA_USAGE = 'Usage: /svc <what to do>, e.g. /svc fix the flaky login test. Nothing was queued.';

// A percent-encoded dot, slash or backslash: the receiving server may decode it into a path step our parser kept.
const ENCODED_PATH_STEP = /%(2e|2f|5c)/i;

/**
 * True only for an https URL under the configured hooks prefix (spec: any other URL is never contacted). The URL
 * must read exactly as the WHATWG parser writes it: dot segments (also `%2e%2e`), backslashes, tabs and newlines
 * (`.<TAB>.`), other control characters, an upper-case host or a default port all change it under parsing, so
 * such a URL is refused instead of being sent somewhere its text did not say (`…/hooks/../admin/x`).
 * Encoded dots and slashes are refused too, and the prefix must end at a path boundary.
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
  const input = readChata(mediaType(ctx), raw);
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
      duplicate: (id) => json(200, {
        status: 'duplicate', response_type: 'ephemeral', text: `Already queued as job ${id}.`,
      }),
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
