// One sender per origin that takes a completion summary: chata response_url, trackera GraphQL comment, trackerb REST
// comment.
import { FailedError } from '../errors.ts';
import { adfSummary, markdownSummary, slackSummary } from './summary-render.ts';
import type { SummaryParts } from './summary.ts';
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
export class PermanentError extends FailedError {}

/** Thrown for an answer that may get better: a 5xx, 408 or 429; the notifier tries again with backoff. */
export class RetryableError extends FailedError {}

function check(status: number, what: string): void {
  if (status >= 200 && status < 300) return;
  const message = `${what} answered HTTP ${status}`;
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) throw new PermanentError(message);
  throw new RetryableError(message);
}

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

/** What trackera's GraphQL API answers to commentCreate. */
type TrackeraCommentAnswer = { errors?: unknown; data?: { commentCreate?: { success?: unknown } } };

/** Whether a channel could send a summary now (GET /status): its settings are there, never their values. */
export function replyConfigured(channel: string, config: NotifyConfig): boolean {
  if (channel === 'chata') return config.chataHooksPrefix !== '';
  if (channel === 'trackera') return Boolean(config.trackeraApiKey);
  if (channel === 'trackerb') return config.trackerb !== undefined;
  return false;
}

/** How one origin's summary is sent; `parts` are rendered in that vendor's format (summary-render.ts). */
export function prepareDelivery(
  channel: string, target: Record<string, unknown>, parts: SummaryParts, config: NotifyConfig,
): Delivery | string {
  if (channel === 'chata') {
    if (!isAllowedChataUrl(target.response_url, config.chataHooksPrefix)) {
      return 'response_url is not under CHATA_HOOKS_PREFIX';
    }
    const url = new URL(target.response_url);
    const body = JSON.stringify({ response_type: 'ephemeral', replace_original: false, text: slackSummary(parts) });
    return {
      channel,
      url,
      send: async (post) => {
        const res = await post(url, {}, body);
        check(res.status, 'chata response_url');
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
      variables: { input: { issueId: target.issue_id, body: markdownSummary(parts) } },
    });
    return {
      channel,
      url,
      send: async (post) => {
        // Personal API keys go in Authorization as-is, without "Bearer" (trackera GraphQL docs).
        const res = await post(url, { authorization: key }, body);
        check(res.status, 'trackera API');
        const answer = JSON.parse(res.text || '{}') as TrackeraCommentAnswer;
        if (answer.errors || answer.data?.commentCreate?.success !== true) {
          throw new PermanentError('trackera API refused the comment');
        }
      },
    };
  }
  if (channel === 'trackerb') {
    const tb = config.trackerb;
    if (!tb) return 'TRACKERB_BASE_URL, TRACKERB_EMAIL and TRACKERB_API_TOKEN are not all set';
    if (typeof target.issue_key !== 'string') return 'no trackerb issue key';
    const base = tb.baseUrl.replace(/\/+$/, '');
    const url = new URL(`${base}/rest/api/3/issue/${encodeURIComponent(target.issue_key)}/comment`);
    const auth = `Basic ${Buffer.from(`${tb.email}:${tb.token}`).toString('base64')}`;
    const body = JSON.stringify({ body: adfSummary(parts) });
    return {
      channel,
      url,
      send: async (post) => {
        const res = await post(url, { authorization: auth, accept: 'application/json' }, body);
        check(res.status, 'trackerb API');
      },
    };
  }
  return `origin ${channel} takes no completion summary`;
}
