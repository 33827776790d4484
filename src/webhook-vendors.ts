// Which real service each webhook route fits, and the header names it signs with. The spec's neutral names
// (`X-CHATA-Signature`, …) stay; each route also reads its vendor's own names, with the same secret, the same check and
// the same replay window, so Slack, Sentry, Linear, Jira and Teams connect as they are
// (/work/shared/reference/vendor-webhooks.md). Must not: add a second way to verify; only where the values come from.
import type { IncomingHttpHeaders } from 'node:http';

type Header = string | string[] | undefined;

/** One family of headers that travel together: a signature and, where the scheme signs one, its timestamp. */
export interface HeaderFamily {
  signature: string;
  timestamp?: string;
}

export interface RouteVendor {
  /** The service this route fits, as the docs and the Integrations page name it. */
  service: string;
  /** Neutral (spec) names first, then the vendor's. Lower case, as Node gives request headers. */
  families: readonly HeaderFamily[];
  /** Other headers read from the delivery (the event resource, the delivery id), neutral name first. */
  resource?: readonly string[];
  delivery?: readonly string[];
}

export const ROUTE_VENDORS = {
  errtrack: {
    service: 'Sentry',
    families: [{ signature: 'errtrack-hook-signature' }, { signature: 'sentry-hook-signature' }],
    resource: ['errtrack-hook-resource', 'sentry-hook-resource'],
  },
  chata: {
    service: 'Slack',
    families: [
      { signature: 'x-chata-signature', timestamp: 'x-chata-request-timestamp' },
      { signature: 'x-slack-signature', timestamp: 'x-slack-request-timestamp' },
    ],
  },
  trackera: {
    service: 'Linear',
    families: [{ signature: 'trackera-signature' }, { signature: 'linear-signature' }],
  },
  trackerb: {
    service: 'Jira Cloud',
    // Jira's admin webhooks sign with exactly the WebSub header the spec names.
    families: [{ signature: 'x-hub-signature' }],
    delivery: ['x-vendorb-webhook-identifier', 'x-atlassian-webhook-identifier'],
  },
  chatb: {
    service: 'Microsoft Teams (outgoing webhook)',
    // Teams signs with `Authorization: HMAC <base64>`, the spec's name too.
    families: [{ signature: 'authorization' }],
  },
  webhook: {
    service: 'GitHub',
    families: [{ signature: 'x-hub-signature-256' }],
  },
} as const satisfies Record<string, RouteVendor>;

export type VendorRoute = keyof typeof ROUTE_VENDORS;

/** The signature and timestamp of the first family whose signature header the delivery carries (else the first). */
export function signedHeaders(
  headers: IncomingHttpHeaders, route: VendorRoute,
): { signature: Header; timestamp: Header } {
  const families: readonly HeaderFamily[] = ROUTE_VENDORS[route].families;
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
export function signatureHeaderNames(route: VendorRoute): string[] {
  const families: readonly HeaderFamily[] = ROUTE_VENDORS[route].families;
  return families.flatMap((f) => (f.timestamp ? [f.signature, f.timestamp] : [f.signature]));
}
