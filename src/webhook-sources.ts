// The one table of the trigger server's sources: one record per route that can start a job. The trigger's route
// table, its secrets, its routing keys and GET /status, the Control Plane's integrations and the OpenAPI document all
// iterate it, so a new source is one record here, its reader (trigger/sources/) and its route (trigger/routes/).
// A leaf: the trigger and the Control Plane are one floor and may not import each other, so what both read lives here.
//
// Header names: the spec's neutral names (`X-CHATA-Signature`, …) stay; each route also reads its vendor's own names,
// with the same secret, the same check and the same replay window, so Slack, Sentry, Linear, Jira and Teams connect
// as they are (/work/shared/reference/vendor-webhooks.md). Must not: add a second way to verify; only where the values
// come from.
import type { IncomingHttpHeaders } from 'node:http';

type Header = string | string[] | undefined;

/** One family of headers that travel together: a signature and, where the scheme signs one, its timestamp. */
export interface HeaderFamily {
  signature: string;
  timestamp?: string;
}

/**
 * How an event finds its served repository (served-repos.ts): a key the operator maps (`kind=KEY` in the repositories
 * file), a chat channel (a permission as well as a route), the repository's own full name, or the request names it.
 */
export type Routing = 'key' | 'channel' | 'full-name' | 'named';

/** An outbound integration a source uses (the completion comment, an API it reads); for GET /v1/integrations. */
export interface Outbound {
  name: string;
  /** Each inner list is "any one of"; every outer entry is required. */
  needs: readonly (readonly string[])[];
  /** A variable that must also be an https URL for the integration to count as configured. */
  https?: string;
}

export interface WebhookSource {
  /** The route's one name: its path, its `origin` in the job database, its dedupe-key prefix and its log field. */
  name: string;
  /** The service this route fits, as the docs and the Integrations page name it. */
  service?: string;
  /** The variables holding its secret, the first set wins (named in 503 replies and logs; never their values). */
  secret: readonly string[];
  /** A variable naming a file that holds the secret, read when none of `secret` is set. */
  secretFile?: string;
  /** The secret is a base64 key (decoded before use): not valid base64 disables the route. */
  secretForm?: 'base64';
  /** Other variables the route needs to take any event (each inner list "any one of"). */
  needs?: readonly (readonly string[])[];
  /** Neutral (spec) names first, then the vendor's. Lower case, as Node gives request headers. */
  families?: readonly HeaderFamily[];
  /** Other headers read from the delivery (the event resource, the delivery id), neutral name first. */
  resource?: readonly string[];
  delivery?: readonly string[];
  routing: Routing;
  /** What a `key` or `channel` source's routing key is, as `svc repos` help names it (`trackera=TEAM`). */
  keyName?: string;
  /**
   * The most UTF-8 bytes of a job's brief: longer text is cut on a character boundary; a longer `jobs` brief (svc's
   * own API) is refused instead (spec "Per-route behaviour").
   */
  briefBytes: number;
  /** The channel its completion summary goes back to (trigger/notify-channels.ts), if any. */
  reply?: string;
  outbound?: readonly Outbound[];
  /** OpenAPI: what the route takes, and its 200 answer besides the 202 (a skip, or the chat's own reply format). */
  api?: { summary: string; answer: 'skipped' | 'chat' };
}

export const SOURCES = [
  {
    name: 'errtrack',
    service: 'Sentry',
    secret: ['SVC_ERRTRACK_WEBHOOK_SECRET', 'ERRTRACK_CLIENT_SECRET'],
    families: [{ signature: 'errtrack-hook-signature' }, { signature: 'sentry-hook-signature' }],
    resource: ['errtrack-hook-resource', 'sentry-hook-resource'],
    briefBytes: 1500,
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
    briefBytes: 1500,
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
    delivery: ['x-vendorb-webhook-identifier', 'x-atlassian-webhook-identifier'],
    briefBytes: 1500,
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
    families: [
      { signature: 'x-chata-signature', timestamp: 'x-chata-request-timestamp' },
      { signature: 'x-slack-signature', timestamp: 'x-slack-request-timestamp' },
    ],
    briefBytes: 1500,
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
    // Teams signs with `Authorization: HMAC <base64>`, the spec's name too.
    families: [{ signature: 'authorization' }],
    briefBytes: 1500,
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
    resource: ['x-github-event'],
    delivery: ['x-github-delivery'],
    briefBytes: 1500,
    routing: 'full-name',
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

type Source = (typeof SOURCES)[number];
export type SourceName = Source['name'];
/** Sources whose events name no repository: the operator maps their keys (or channels) to one. */
export type RoutingKind = Extract<Source, { routing: 'key' | 'channel' }>['name'];
/** Chat sources: a channel's mapping is a permission, not only a route. */
export type ChatKind = Extract<Source, { routing: 'channel' }>['name'];
/** Sources that sign their deliveries with headers of their vendor's. */
export type VendorRoute = Extract<Source, { families: unknown }>['name'];

export const SOURCE_NAMES: readonly SourceName[] = SOURCES.map((s) => s.name);
export const ROUTING_KINDS: readonly RoutingKind[] = SOURCES.flatMap((s) => (
  s.routing === 'key' || s.routing === 'channel' ? [s.name] : []
));
export const CHAT_KINDS: readonly ChatKind[] = SOURCES.flatMap((s) => (s.routing === 'channel' ? [s.name] : []));

const BY_NAME = new Map<string, WebhookSource>(SOURCES.map((s) => [s.name, s]));

export function sourceOf(name: SourceName): WebhookSource {
  return BY_NAME.get(name)!;
}

/** The signature and timestamp of the first family whose signature header the delivery carries (else the first). */
export function signedHeaders(
  headers: IncomingHttpHeaders, route: VendorRoute,
): { signature: Header; timestamp: Header } {
  const families = sourceOf(route).families!;
  const family = families.find((f) => headers[f.signature] !== undefined) ?? families[0]!;
  return { signature: headers[family.signature], timestamp: family.timestamp ? headers[family.timestamp] : undefined };
}

/** The first of `names` the delivery carries, as one string (a repeated header reads as its first value). */
export function firstHeader(headers: IncomingHttpHeaders, names: readonly string[] | undefined): string | undefined {
  for (const name of names ?? []) {
    const value = headers[name];
    if (value !== undefined) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

/** Every header name a route reads its signature from, as a vendor writes it (docs, Integrations page). */
export function signatureHeaderNames(source: WebhookSource): string[] {
  return (source.families ?? []).flatMap((f) => (f.timestamp ? [f.signature, f.timestamp] : [f.signature]));
}
