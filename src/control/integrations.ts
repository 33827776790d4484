// Which trigger routes and outbound integrations this process could use, from environment variable names only.
// Values are read to test presence (and equality between route secrets) and never leave this function.
import { safeEqual } from '../http/guards.ts';
import { SOURCES, signatureHeaderNames, type Outbound, type WebhookSource } from '../webhook-sources.ts';
import { findOnPath } from './provider-detect.ts';

/** Pull requests are the engine's, not a source's: the one outbound integration the source table does not hold. */
const GITHUB_PRS: Outbound = { name: 'github_prs', needs: [['GITHUB_TOKEN', 'GH_TOKEN']] };

function firstSet(env: NodeJS.ProcessEnv, names: readonly string[]): string | undefined {
  return names.find((n) => typeof env[n] === 'string' && env[n].trim() !== '');
}

/** One entry per route and outbound integration: `configured` when every variable it needs is set (and unique). */
export function integrationStatus(env: NodeJS.ProcessEnv) {
  // Secrets shared between routes disable both, as the trigger server does at startup (files are not read here).
  const secrets = SOURCES.map((s) => {
    const name = firstSet(env, s.secret);
    return { route: s.name, value: name ? env[name]! : undefined };
  });
  const clashing = new Set<string>();
  for (const a of secrets) {
    for (const b of secrets) {
      if (a === b || a.value === undefined || b.value === undefined) continue;
      if (safeEqual(a.value, b.value)) clashing.add(a.route);
    }
  }
  const routes = SOURCES.map((s: WebhookSource) => {
    const needs = [[...s.secret, ...(s.secretFile ? [s.secretFile] : [])], ...(s.needs ?? [])];
    const configured = needs.every((anyOf) => firstSet(env, anyOf) !== undefined) && !clashing.has(s.name);
    const service = s.service ? { service: s.service, headers: signatureHeaderNames(s) } : {};
    const route = `/${s.name}`;
    return { name: s.name, kind: 'trigger' as const, configured, variables: needs.flat(), route, ...service };
  });
  const outbound = [...SOURCES.flatMap((s: WebhookSource) => s.outbound ?? []), GITHUB_PRS].map((o) => {
    let configured = o.needs.every((anyOf) => firstSet(env, anyOf) !== undefined);
    if (o.https) configured &&= /^https:\/\//i.test(env[o.https] ?? '');
    // `gh` on PATH opens pull requests with its own login.
    if (o === GITHUB_PRS) configured ||= findOnPath('gh', env.PATH) !== null;
    return { name: o.name, kind: 'outbound' as const, configured, variables: o.needs.flat() };
  });
  return [...routes, ...outbound];
}
