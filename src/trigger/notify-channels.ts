// One sender per origin that takes a completion summary: chata response_url, trackera GraphQL comment, trackerb REST comment.
import { adfDocument } from './adf.ts';
import type { Poster } from './https-post.ts';

export interface NotifyConfig {
  /** chata summaries go only to response_urls under this https prefix. */
  chataHooksPrefix: string;
  trackeraApiUrl: string;
  trackeraApiKey: string | undefined;
  trackerb: { baseUrl: string; email: string; token: string } | undefined;
}

/** A prepared outbound message: where it goes (host only is ever reported) and how to send it once. */
export interface Delivery {
  channel: string;
  url: URL;
  send: (post: Poster) => Promise<void>;
}

/** Thrown for an answer that will not get better by retrying (4xx other than 408/429). */
export class PermanentError extends Error {}

function check(status: number, text: string, what: string): void {
  if (status >= 200 && status < 300) return;
  const message = `${what} answered HTTP ${status}`;
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) throw new PermanentError(message);
  throw new Error(message);
}

/** True only for an https URL that starts with the configured hooks prefix (spec: any other host is never contacted). */
export function isAllowedChataUrl(value: unknown, prefix: string): value is string {
  if (typeof value !== 'string' || !prefix.startsWith('https://') || !value.startsWith(prefix)) return false;
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}

export function prepareDelivery(channel: string, target: Record<string, unknown>, summary: string, config: NotifyConfig): Delivery | string {
  if (channel === 'chata') {
    if (!isAllowedChataUrl(target.response_url, config.chataHooksPrefix)) return 'response_url is not under CHATA_HOOKS_PREFIX';
    const url = new URL(target.response_url);
    const body = JSON.stringify({ response_type: 'ephemeral', replace_original: false, text: summary });
    return {
      channel,
      url,
      send: async (post) => {
        const res = await post(url, {}, body);
        check(res.status, res.text, 'chata response_url');
      },
    };
  }
  if (channel === 'trackera') {
    if (!config.trackeraApiKey) return 'TRACKERA_API_KEY is not set';
    if (typeof target.issue_id !== 'string') return 'no trackera issue id';
    const url = new URL(config.trackeraApiUrl);
    const key = config.trackeraApiKey;
    const body = JSON.stringify({
      query: 'mutation CommentCreate($input: CommentCreateInput!) { commentCreate(input: $input) { success } }',
      variables: { input: { issueId: target.issue_id, body: summary } },
    });
    return {
      channel,
      url,
      send: async (post) => {
        // Personal API keys go in Authorization as-is, without "Bearer" (trackera GraphQL docs).
        const res = await post(url, { authorization: key }, body);
        check(res.status, res.text, 'trackera API');
        const answer = JSON.parse(res.text || '{}') as { errors?: unknown; data?: { commentCreate?: { success?: unknown } } };
        if (answer.errors || answer.data?.commentCreate?.success !== true) throw new PermanentError('trackera API refused the comment');
      },
    };
  }
  if (channel === 'trackerb') {
    const tb = config.trackerb;
    if (!tb) return 'TRACKERB_BASE_URL, TRACKERB_EMAIL and TRACKERB_API_TOKEN are not all set';
    if (typeof target.issue_key !== 'string') return 'no trackerb issue key';
    const url = new URL(`${tb.baseUrl.replace(/\/+$/, '')}/rest/api/3/issue/${encodeURIComponent(target.issue_key)}/comment`);
    const auth = `Basic ${Buffer.from(`${tb.email}:${tb.token}`).toString('base64')}`;
    const body = JSON.stringify({ body: adfDocument(summary) });
    return {
      channel,
      url,
      send: async (post) => {
        const res = await post(url, { authorization: auth, accept: 'application/json' }, body);
        check(res.status, res.text, 'trackerb API');
      },
    };
  }
  return `origin ${channel} takes no completion summary`;
}
