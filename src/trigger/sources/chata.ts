// chata payloads: slash commands (form body) become `svc start <text>`; url_verification answers the challenge.
import { describe } from '../../untrusted.ts';
import { sanitizeBrief } from '../brief.ts';
import { sourceOf } from '../../webhook-sources.ts';

export type ChataInput =
  | { kind: 'command'; text: string; responseUrl: string | null; user: string | null; channel: string | null }
  | { kind: 'challenge'; challenge: string }
  | { kind: 'skip'; reason: string; eventId: string | null };

/** Slash-command text as an argv element: one line, leading hyphens stripped so it is never an option (spec rule 1). */
export function chataText(raw: string): string {
  return sanitizeBrief(raw, sourceOf('chata').briefBytes);
}

export function readChata(
  contentType: string, raw: Buffer, parseJsonObject: (b: Buffer) => Record<string, unknown>,
): ChataInput {
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

export const CHATA_USAGE = 'Usage: /svc <what to do>, e.g. /svc fix the flaky login test. Nothing was queued.';
