// Read-only catalogue routes: providers on PATH, integrations (booleans), notifications, the receipt key, repo names.
import { basename } from 'node:path';
import { json } from '../../http/respond.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';
import { checkQueryKeys, decodeCursor, encodeCursor, parseLimit } from '../params.ts';
import { iso } from '../../iso-time.ts';
import { readEffectiveConfig } from '../config-schema.ts';
import { describeProviders } from '../provider-detect.ts';
import { createVersionProbe, type VersionProbe } from '../../engine/cli-version.ts';
import { integrationStatus } from '../integrations.ts';
import { knownKeys, publicKeyInfo } from '../../keys.ts';
import { listProjects } from '../projects.ts';

// One probe cache per running app, so tests with different PATHs never share answers.
const probes = new WeakMap<ControlDeps, VersionProbe>();

function probeFor(deps: ControlDeps): VersionProbe {
  if (!probes.has(deps)) probes.set(deps, createVersionProbe(deps.env));
  return probes.get(deps)!;
}

export const listProviders: Handler<ControlDeps> = async (ctx) => {
  checkQueryKeys(ctx.query, []);
  const { config } = readEffectiveConfig(ctx.deps.stores.config);
  const commands = (config.providers ?? {}) as Record<string, { command: string[] }>;
  const found = await describeProviders(commands, ctx.deps.env.PATH, probeFor(ctx.deps));
  const items = found.map((p) => ({ ...p, default: config.default_provider === p.name }));
  // DESIGN §4: a bare array, not a page.
  return json(200, items);
};

export const listIntegrations: Handler<ControlDeps> = (ctx) => {
  checkQueryKeys(ctx.query, []);
  return json(200, { items: integrationStatus(ctx.deps.env) });
};

export const listNotifications: Handler<ControlDeps> = (ctx) => {
  checkQueryKeys(ctx.query, ['limit', 'cursor']);
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
  checkQueryKeys(ctx.query, []);
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
  checkQueryKeys(ctx.query, []);
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

/** Full paths, so loopback only like /v1/config. */
export const listRegisteredProjects: Handler<ControlDeps> = (ctx) => {
  checkQueryKeys(ctx.query, []);
  return json(200, { items: listProjects(ctx.deps) });
};
