// Which trigger routes and outbound integrations this process could use, from environment variable names only.
// Values are read to test presence (and equality between route secrets) and never leave this function.
import { safeEqual } from '../http/guards.ts';
import { ROUTE_VENDORS, signatureHeaderNames, type VendorRoute } from '../webhook-vendors.ts';

export interface IntegrationStatus {
  name: string;
  kind: 'trigger' | 'outbound';
  /** Every variable the integration needs is set (for routes: its secret, and the secret is unique). */
  configured: boolean;
  /** The names of the variables that configure it, so a user knows what to set. */
  variables: string[];
  /** Trigger routes only: the path, the real service it fits, and the signature headers it reads (neutral first). */
  route?: string;
  service?: string;
  headers?: string[];
}

interface Spec {
  name: string;
  kind: 'trigger' | 'outbound';
  /** Each inner list is "any one of"; every outer entry is required. */
  needs: string[][];
  /** Route secrets: equal to another route secret disables the route (DESIGN §5). */
  secret?: boolean;
}

const SPECS: readonly Spec[] = [
  {
    name: 'errtrack', kind: 'trigger', needs: [['SVC_ERRTRACK_WEBHOOK_SECRET', 'ERRTRACK_CLIENT_SECRET']], secret: true,
  },
  { name: 'chata', kind: 'trigger', needs: [['CHATA_SIGNING_SECRET']], secret: true },
  { name: 'trackera', kind: 'trigger', needs: [['TRACKERA_WEBHOOK_SECRET']], secret: true },
  {
    name: 'trackerb', kind: 'trigger', needs: [['TRACKERB_WEBHOOK_SECRET'], ['TRACKERB_ASSIGNEES', 'TRACKERB_LABELS']],
    secret: true,
  },
  { name: 'chatb', kind: 'trigger', needs: [['CHATB_SECURITY_TOKEN']], secret: true },
  { name: 'jobs', kind: 'trigger', needs: [['SVC_API_TOKEN', 'SVC_API_TOKEN_FILE']], secret: true },
  { name: 'webhook', kind: 'trigger', needs: [['GITHUB_WEBHOOK_SECRET']], secret: true },
  { name: 'trackera_comments', kind: 'outbound', needs: [['TRACKERA_API_KEY']] },
  {
    name: 'trackerb_comments', kind: 'outbound',
    needs: [['TRACKERB_BASE_URL'], ['TRACKERB_EMAIL'], ['TRACKERB_API_TOKEN']],
  },
  { name: 'github_prs', kind: 'outbound', needs: [['GITHUB_TOKEN', 'GH_TOKEN']] },
  { name: 'errtrack_fetch', kind: 'outbound', needs: [['ERRTRACK_AUTH_TOKEN']] },
];

function present(env: NodeJS.ProcessEnv, name: string): boolean {
  return typeof env[name] === 'string' && env[name]!.trim() !== '';
}

function firstSet(env: NodeJS.ProcessEnv, names: string[]): string | undefined {
  return names.find((n) => present(env, n));
}

/** `extra` lets callers add facts the environment cannot show (a github token in config, `gh` on PATH). */
export function integrationStatus(env: NodeJS.ProcessEnv, extra: { githubPrs?: boolean } = {}): IntegrationStatus[] {
  // Secrets shared between routes disable every route in the pair, as the trigger server does at startup.
  const secrets = SPECS.filter((s) => s.secret && s.name !== 'jobs').map((s) => {
    const name = firstSet(env, s.needs[0]!);
    return { route: s.name, value: name ? env[name]! : undefined };
  });
  const apiToken = present(env, 'SVC_API_TOKEN') ? env.SVC_API_TOKEN! : undefined;
  if (apiToken) secrets.push({ route: 'jobs', value: apiToken });
  const clashing = new Set<string>();
  for (const a of secrets) {
    for (const b of secrets) {
      if (a === b || a.value === undefined || b.value === undefined) continue;
      if (safeEqual(a.value, b.value)) clashing.add(a.route);
    }
  }
  return SPECS.map((s) => {
    let configured = s.needs.every((anyOf) => firstSet(env, anyOf) !== undefined) && !clashing.has(s.name);
    if (s.name === 'trackerb_comments') configured &&= /^https:\/\//i.test(env.TRACKERB_BASE_URL ?? '');
    if (s.name === 'github_prs') configured ||= extra.githubPrs === true;
    const status: IntegrationStatus = { name: s.name, kind: s.kind, configured, variables: s.needs.flat() };
    if (s.kind === 'trigger') status.route = `/${s.name}`;
    if (s.name in ROUTE_VENDORS) {
      const route = s.name as VendorRoute;
      status.service = ROUTE_VENDORS[route].service;
      status.headers = signatureHeaderNames(route);
    }
    return status;
  });
}
