// The one table of the trigger server's sources and the brief sanitizer (docs/architecture.md "A webhook source"): a
// leaf, since the trigger and the Control Plane may not import each other. A vendor's header names are only where a
// route's one secret and one check read their values, never a second way to verify.
import { hash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { capUtf8, oneLine } from './one-line.ts';

/** An outbound integration a source uses (the completion comment, an API it reads); for GET /v1/integrations. */
export interface Outbound {
  name: string;
  /** Each inner list is "any one of"; every outer entry is required. */
  needs: readonly (readonly string[])[];
  /** A variable that must also be an https URL for the integration to count as configured. */
  https?: string;
}

export interface WebhookSource {
  /** Its route path, its `origin` in the job database, its dedupe-key prefix and its log field. */
  name: string;
  service?: string;
  /** The variables holding its secret, the first set wins (named in 503 replies and logs; never their values). */
  secret: readonly string[];
  /** A variable naming a file that holds the secret, read when none of `secret` is set. */
  secretFile?: string;
  /** The secret is a base64 key: not valid base64 disables the route. */
  secretForm?: 'base64';
  /** Other variables the route needs to take any event (each inner list "any one of"). */
  needs?: readonly (readonly string[])[];
  /**
   * A signature header and, where the scheme signs one, its timestamp's (unix seconds, ±300 s): the spec's names
   * first, lower case.
   */
  families?: readonly { signature: string; timestamp?: string }[];
  /** HMAC-SHA256 over the body (`v0:<ts>:<body>` with a timestamp), as `mac` after `prefix`; none: a bearer token. */
  scheme?: { mac: 'hex' | 'base64'; prefix?: RegExp };
  /** Where the signed body carries its time (±300 s, checked once it is parsed): unix ms or ISO-8601. */
  bodyTime?: { field: string; form: 'ms' | 'iso' };
  /** A form body (a slash command) is read as one; every other source refuses a form (415). */
  forms?: true;
  /** Other headers read from the delivery (the event resource, the delivery id), neutral name first. */
  resource?: readonly string[];
  delivery?: readonly string[];
  /** How an event finds its served repository (served-repos.ts): an operator-mapped key, a chat channel, its name. */
  routing: 'key' | 'channel' | 'full-name' | 'named';
  /** What a `key` or `channel` source's routing key is, as `svc repos` help names it (`trackera=TEAM`). */
  keyName?: string;
  /** The most UTF-8 bytes of a brief (DEFAULT_BRIEF_BYTES unless given): longer text is cut, a longer `jobs` brief
   * refused (spec). */
  briefBytes?: number;
  /** The job's `svc` argv, BRIEF standing for the brief (its own element, never an option); none for `jobs`. */
  argv?: readonly string[];
  /** The channel its completion summary goes back to (its sender: trigger/sources/<name>.ts), if any. */
  reply?: string;
  outbound?: readonly Outbound[];
  /** OpenAPI: what the route takes, and its 200 answer besides the 202 (a skip, or the chat's own reply format). */
  api?: { summary: string; answer: 'skipped' | 'chat' };
}

/** Where a job's brief goes in its record's `argv`. */
export const BRIEF = '<brief>';

export const SOURCES = [
  {
    name: 'errtrack',
    service: 'Sentry',
    secret: ['SVC_ERRTRACK_WEBHOOK_SECRET', 'ERRTRACK_CLIENT_SECRET'],
    families: [{ signature: 'errtrack-hook-signature' }, { signature: 'sentry-hook-signature' }],
    scheme: { mac: 'hex' },
    resource: ['errtrack-hook-resource', 'sentry-hook-resource'],
    argv: ['start', BRIEF, '--pr', '--detach'],
    routing: 'key',
    keyName: 'SLUG',
    outbound: [{ name: 'errtrack_fetch', needs: [['ERRTRACK_AUTH_TOKEN']] }],
    api: {
      summary: 'Sentry alert (errtrack-hook-signature or Sentry-Hook-Signature: hex HMAC-SHA256 of the body)',
      answer: 'skipped',
    },
  },
  {
    name: 'trackera',
    service: 'Linear',
    secret: ['TRACKERA_WEBHOOK_SECRET'],
    families: [{ signature: 'trackera-signature' }, { signature: 'linear-signature' }],
    scheme: { mac: 'hex' },
    bodyTime: { field: 'webhookTimestamp', form: 'ms' },
    // A retry re-stamps webhookTimestamp (new bytes) under the same Linear-Delivery.
    delivery: ['linear-delivery'],
    argv: ['start', BRIEF, '--detach'],
    routing: 'key',
    keyName: 'TEAM',
    reply: 'trackera',
    outbound: [{ name: 'trackera_comments', needs: [['TRACKERA_API_KEY']] }],
    api: {
      summary: 'Linear issue event (TRACKERA-Signature or Linear-Signature, signed webhookTimestamp within 300 s)',
      answer: 'skipped',
    },
  },
  {
    name: 'trackerb',
    service: 'Jira Cloud',
    secret: ['TRACKERB_WEBHOOK_SECRET'],
    needs: [['TRACKERB_ASSIGNEES', 'TRACKERB_LABELS']],
    // Jira's admin webhooks sign with exactly the WebSub header the spec names.
    families: [{ signature: 'x-hub-signature' }],
    scheme: { mac: 'hex', prefix: /^sha256=/ },
    delivery: ['x-vendorb-webhook-identifier', 'x-atlassian-webhook-identifier'],
    argv: ['start', '--brief', BRIEF, '--pr', '--detach'],
    routing: 'key',
    keyName: 'PROJECT',
    reply: 'trackerb',
    outbound: [{
      name: 'trackerb_comments', needs: [['TRACKERB_BASE_URL'], ['TRACKERB_EMAIL'], ['TRACKERB_API_TOKEN']],
      https: 'TRACKERB_BASE_URL',
    }],
    api: {
      summary: 'Jira Cloud issue created/updated (X-Hub-Signature sha256=…; dedupe on X-Atlassian-Webhook-Identifier '
        + 'and body)',
      answer: 'skipped',
    },
  },
  {
    name: 'chata',
    service: 'Slack',
    secret: ['CHATA_SIGNING_SECRET'],
    // One app's signing secret serves every workspace it is installed in: the operator names theirs.
    needs: [['CHATA_TEAM_IDS']],
    families: [
      { signature: 'x-chata-signature', timestamp: 'x-chata-request-timestamp' },
      { signature: 'x-slack-signature', timestamp: 'x-slack-request-timestamp' },
    ],
    scheme: { mac: 'hex', prefix: /^v0=/ },
    forms: true,
    argv: ['start', BRIEF, '--detach'],
    routing: 'channel',
    keyName: 'CHANNEL',
    reply: 'chata',
    api: {
      summary: 'Slack slash command or events URL verification (v0 signature in X-CHATA-Signature or '
        + 'X-Slack-Signature, 300 s window)',
      answer: 'chat',
    },
  },
  {
    name: 'chatb',
    service: 'Microsoft Teams (outgoing webhook)',
    secret: ['CHATB_SECURITY_TOKEN'],
    secretForm: 'base64',
    // Teams signs with `Authorization: HMAC <base64>`, the spec's name too; its signed time is the Activity's.
    families: [{ signature: 'authorization' }],
    scheme: { mac: 'base64', prefix: /^HMAC\s+/i },
    bodyTime: { field: 'timestamp', form: 'iso' },
    argv: ['start', '--brief', BRIEF, '--pr', '--detach'],
    routing: 'channel',
    keyName: 'CHANNEL',
    api: {
      summary: 'Microsoft Teams outgoing-webhook activity (Authorization: HMAC <base64>; timestamp within 300 s)',
      answer: 'chat',
    },
  },
  {
    name: 'webhook',
    service: 'GitHub',
    secret: ['GITHUB_WEBHOOK_SECRET'],
    families: [{ signature: 'x-hub-signature-256' }],
    scheme: { mac: 'hex', prefix: /^sha256=/ },
    resource: ['x-github-event'],
    delivery: ['x-github-delivery'],
    argv: ['start', '--brief', BRIEF, '--pr', '--detach'],
    routing: 'full-name',
    // Its progress comment uses the GitHub token the pull requests use (the Integrations page's github_prs).
    reply: 'webhook',
    api: { summary: 'GitHub webhook (GITHUB_WEBHOOK_SECRET; X-Hub-Signature-256)', answer: 'skipped' },
  },
  {
    // svc's own API: a bearer token, not a signature; the request names its repository.
    name: 'jobs',
    secret: ['SVC_API_TOKEN'],
    secretFile: 'SVC_API_TOKEN_FILE',
    briefBytes: 4096,
    routing: 'named',
  },
] as const satisfies readonly WebhookSource[];

export type Source = (typeof SOURCES)[number];
export type SourceName = Source['name'];
/** Sources whose events name no repository: the operator maps their keys (or channels) to one. */
export type RoutingKind = Extract<Source, { routing: 'key' | 'channel' }>['name'];
/** The channels a completion summary goes back by (each its sender, trigger/sources/<name>.ts). */
export type ReplyName = Extract<Source, { reply: string }>['reply'];
/** Chat sources: a channel's mapping is a permission, not only a route. */
export type ChatKind = Extract<Source, { routing: 'channel' }>['name'];

export const SOURCE_NAMES: readonly SourceName[] = SOURCES.map((s) => s.name);
export const ROUTING_KINDS: readonly RoutingKind[] = SOURCES.flatMap((s) => (
  s.routing === 'key' || s.routing === 'channel' ? [s.name] : []
));
export const CHAT_KINDS: readonly ChatKind[] = SOURCES.flatMap((s) => (s.routing === 'channel' ? [s.name] : []));

export function sourceOf(name: SourceName): WebhookSource {
  return SOURCES.find((s) => s.name === name)!;
}

/** The first of `names` the delivery carries, as one string (a repeated header reads as its first value). */
export function firstHeader(headers: IncomingHttpHeaders, names: readonly string[] | undefined): string | undefined {
  for (const name of names ?? []) {
    const value = headers[name];
    if (value !== undefined) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

/** A delivery's dedupe keys: its body's hash, its vendor's delivery id if any, then `more`; prefixed by route. */
export function deliveryKeys(
  name: SourceName, headers: IncomingHttpHeaders, raw: Buffer | undefined, ...more: string[]
): string[] {
  const id = firstHeader(headers, sourceOf(name).delivery)?.trim();
  const keys = [`${name}:body:${hash('sha256', raw ?? '', 'hex')}`];
  if (id) keys.push(`${name}:delivery:${id.slice(0, 200)}`);
  for (const key of more) keys.push(key);
  return keys;
}

/** Every header name a route reads its signature from, as a vendor writes it (docs, Integrations page). */
export function signatureHeaderNames(source: WebhookSource): string[] {
  return (source.families ?? []).flatMap((f) => (f.timestamp ? [f.signature, f.timestamp] : [f.signature]));
}

/** Decodes a `secretForm: 'base64'` secret (chatb's token); null when not canonical base64 (its route is disabled). */
export function decodeChatbKey(token: string): Buffer | null {
  const t = token.trim();
  if (t.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(t)) return null;
  return Buffer.from(t, 'base64');
}

/** A brief's cap where its source's record gives none. */
export const DEFAULT_BRIEF_BYTES = 1500;

/** The source's brief made of `text`: the one sanitizer below, at the record's cap. */
export function briefOf(name: SourceName, text: string): string {
  return sanitizeBrief(text, sourceOf(name).briefBytes);
}

/** A brief must never be read as a flag by `svc start`: leading hyphens (and dash look-alikes) go. */
export function stripLeadingHyphens(text: string): string {
  return text.replace(/^[\s\-\u2010-\u2015\u2212]+/u, '');
}

/** The one sanitizer every origin goes through: one line, no leading hyphen, capped. */
export function sanitizeBrief(text: string, maxBytes = DEFAULT_BRIEF_BYTES): string {
  // A cleaned prefix is a prefix of the cleaned whole: a head well past the cap gives the same brief, cheaper.
  const head = maxBytes * 2 + 64;
  if (text.length > head) {
    const cleaned = stripLeadingHyphens(oneLine(text.slice(0, head)));
    if (Buffer.byteLength(cleaned, 'utf8') > maxBytes + 8) return capUtf8(cleaned, maxBytes);
  }
  return capUtf8(stripLeadingHyphens(oneLine(text)), maxBytes);
}
