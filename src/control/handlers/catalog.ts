// Read-only catalogue routes: providers on PATH, integrations (booleans), notifications, the audit chain, the receipt
// key, repo names.
import { basename } from 'node:path';
import { json } from '../../http/respond.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';
import { decodeCursor, encodeCursor, invalidParam, parseLimit } from '../params.ts';
import { iso } from '../../iso-time.ts';
import { readEffectiveConfig } from '../config-schema.ts';
import { describeProviders, findOnPath } from '../provider-detect.ts';
import { createVersionProbe, type VersionProbe } from '../../engine/cli-version.ts';
import { controlRunProviders } from '../../engine/config.ts';
import { isLocalCaller, isLoopbackHost, safeEqual } from '../../http/guards.ts';
import { SOURCES, signatureHeaderNames, type Outbound, type WebhookSource } from '../../webhook-sources.ts';
import { knownKeys, publicKeyInfo } from '../../keys.ts';
import { realOrNull } from '../../spawn/tree.ts';

// One probe cache per running app, so tests with different PATHs never share answers.
const probes = new WeakMap<ControlDeps, VersionProbe>();

function probeFor(deps: ControlDeps): VersionProbe {
  if (!probes.has(deps)) probes.set(deps, createVersionProbe(deps.env));
  return probes.get(deps)!;
}

export const listProviders: Handler<ControlDeps> = async (ctx) => {
  const { config } = readEffectiveConfig(ctx.deps.stores.config);
  // What a run this server starts can use: the operator's files' and the `providers` setting over them.
  const commands = controlRunProviders(ctx.deps.env, config.providers);
  const found = await describeProviders(commands, ctx.deps.env.PATH, probeFor(ctx.deps));
  // A command provider's program is one of the commands svc runs: its path only to a caller on this machine, as the
  // `providers` setting in GET /v1/config (a built-in's is where its public CLI is installed).
  const local = isLocalCaller(ctx.req, isLoopbackHost(ctx.deps.settings.host));
  const items = found.map((p) => ({
    ...p, path: p.kind === 'command' && !local ? null : p.path, default: config.default_provider === p.name,
  }));
  // DESIGN §4: a bare array, not a page.
  return json(200, items);
};

/** Pull requests are the engine's, not a source's: the one outbound integration the source table does not hold. */
const GITHUB_PRS: Outbound = { name: 'github_prs', needs: [['GITHUB_TOKEN', 'GH_TOKEN']] };

function firstSet(env: NodeJS.ProcessEnv, names: readonly string[]): string | undefined {
  return names.find((n) => typeof env[n] === 'string' && env[n].trim() !== '');
}

/**
 * One entry per trigger route and outbound integration this process could use: `configured` when every variable it
 * needs is set (and unique). Values are read to test presence (and equality between route secrets), never returned.
 */
export const listIntegrations: Handler<ControlDeps> = (ctx) => {
  const { env } = ctx.deps;
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
  return json(200, { items: [...routes, ...outbound] });
};

export const listNotifications: Handler<ControlDeps> = (ctx) => {
  const limit = parseLimit(ctx.query.get('limit'));
  const cursor = ctx.query.get('cursor');
  const after = cursor === null ? null : (decodeCursor(cursor, ['int', 'int']) as number[]);
  const rows = ctx.deps.stores.notifications.list({
    limit: limit + 1, after: after ? { created_at: after[0]!, id: after[1]! } : null,
  });
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return json(200, {
    items: page.map((n) => ({ ...n, created_at: iso(n.created_at), updated_at: iso(n.updated_at) })),
    next_cursor: rows.length > limit && last ? encodeCursor([last.created_at, last.id]) : null,
  });
};

export const getKeys: Handler<ControlDeps> = (ctx) => {
  // Only public halves are ever serialised.
  const known = knownKeys(ctx.deps.settings.svcHome);
  const keys = known.map((k) => ({ ...publicKeyInfo(k), name: k.name, origin: k.origin }));
  return json(200, { keys });
};

/** A name as users know it: a path (`/home/me/api`) shows only its last segment, never the folders above it. */
function repoName(value: string): string {
  return /^([A-Za-z]:)?[\\/]/.test(value) ? basename(value.replace(/\\/g, '/').replace(/\/+$/, '')) : value;
}

export const listRepos: Handler<ControlDeps> = (ctx) => {
  const { config } = readEffectiveConfig(ctx.deps.stores.config);
  const servedBy = new Map<string, string[]>();
  for (const repo of ctx.deps.stores.stats.distinctRepos()) servedBy.set(repoName(repo), []);
  for (const path of config.repos as string[]) servedBy.set(repoName(path), []);
  for (const row of ctx.deps.stores.servedRepos.list()) {
    const sources = servedBy.get(row.name) ?? [];
    sources.push(row.source);
    servedBy.set(row.name, sources);
  }
  servedBy.delete('');
  const items = [...servedBy.keys()].sort().map((name) => ({ name, served_by: servedBy.get(name)! }));
  return json(200, { items });
};

/** Full paths of folders on this machine, so loopback only (app.ts), like GET /v1/keys and GET /v1/repos. */
export const listRegisteredProjects: Handler<ControlDeps> = (ctx) => {
  const { stores } = ctx.deps;
  const items: Array<{ path: string; via: 'import' | 'repos'; registered_at: string | null }> = stores.projects
    .list().map((p) => ({ path: p.path, via: 'import', registered_at: iso(p.registered_at) }));
  const seen = new Set(items.map((p) => p.path));
  for (const path of readEffectiveConfig(stores.config).config.repos as string[]) {
    if (seen.has(realOrNull(path) ?? path)) continue;
    seen.add(realOrNull(path) ?? path);
    items.push({ path, via: 'repos', registered_at: null });
  }
  return json(200, { items });
};

/** GET /v1/audit: newest first; `?verify=true` also re-checks the whole chain. */
function parseVerify(value: string | null): boolean {
  if (value === null || value === 'false' || value === '0') return false;
  if (value === 'true' || value === '1' || value === '') return true;
  invalidParam('Parameter "verify" must be true or false');
}

export const listAudit: Handler<ControlDeps> = (ctx) => {
  const limit = parseLimit(ctx.query.get('limit'));
  const cursor = ctx.query.get('cursor');
  const verify = parseVerify(ctx.query.get('verify'));
  const audit = ctx.deps.stores.audit;
  const page = audit.list({ limit, beforeId: cursor === null ? null : (decodeCursor(cursor, ['int'])[0] as number) });
  const body: Record<string, unknown> = {
    items: page.items.map((e) => ({ ...e, at: iso(e.at) })),
    next_cursor: page.nextBeforeId === null ? null : encodeCursor([page.nextBeforeId]),
  };
  if (verify) {
    const broken = audit.verifyChain();
    body.chain = { intact: broken === null, first_broken_id: broken };
  }
  return json(200, body);
};
