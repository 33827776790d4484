// Which projects the Control Plane may start a process in: those the operator registered with
// POST /v1/import (the projects table) and those the `repos` setting names. Never a path only a caller named: a
// planted folder must not get a run through the API. Paths are compared by real path (symlinks resolved).
import { realOrNull } from '../spawn/tree.ts';
import type { ControlDeps } from './deps.ts';
import { readEffectiveConfig } from './config-schema.ts';
import { iso } from '../iso-time.ts';

/** Whether `path` (a repository root) is a registered project: imported, or named by the `repos` setting. */
export function isRegisteredProject(deps: ControlDeps, path: string): boolean {
  const real = realOrNull(path);
  if (real === null) return false;
  if (deps.stores.projects.has(real)) return true;
  const repos = readEffectiveConfig(deps.stores.config).config.repos as string[];
  return repos.some((p) => realOrNull(p) === real);
}

/** Every registered project, for GET /v1/projects and the start page's choices: imports first, then `repos`. */
export function listProjects(deps: ControlDeps) {
  const out: Array<{ path: string; via: 'import' | 'repos'; registered_at: string | null }> = deps.stores.projects
    .list().map((p) => ({ path: p.path, via: 'import', registered_at: iso(p.registered_at) }));
  const seen = new Set(out.map((p) => p.path));
  for (const path of readEffectiveConfig(deps.stores.config).config.repos as string[]) {
    if (seen.has(realOrNull(path) ?? path)) continue;
    seen.add(realOrNull(path) ?? path);
    out.push({ path, via: 'repos', registered_at: null });
  }
  return out;
}

/** The message of the refusal a start, retry, resume or verify in an unregistered folder gets. */
export function unregisteredMessage(path: string): string {
  return `Project ${JSON.stringify(path)} is not registered with this Control Plane: ` +
    'import it first (POST /v1/import {"path": …}, or add it to the "repos" setting)';
}
