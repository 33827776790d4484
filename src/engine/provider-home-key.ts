// Which provider home a run's agent gets (DESIGN §7a "Repositories don't meet"): one per provider and repository,
// under ~/.svc/homes/<provider>/<key>/, and where the CLI's template comes from. The key comes from who the run is
// for, never from the repository's files: a trigger-routed job's served entry (its checkout is a fresh clone per
// job), else the checkout's real path. A person at the CLI may name a scope of their own (SVC_PROVIDER_HOME_SCOPE)
// that several of their repositories share; a server-started run never takes it.
import { createHash } from 'node:crypto';
import { realpathSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { setting } from '../settings-registry.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { isRoutedRepoName } from './repo-name.ts';

function isCliRun(env: NodeJS.ProcessEnv): boolean {
  return !env.SVC_ORIGIN || env.SVC_ORIGIN === 'cli';
}

/** A readable, collision-free folder name: the last part of the identity, then a hash of all of it. */
function keyOf(label: string, identity: string): string {
  const slug = label.toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^[.-]+/, '').slice(0, 40) || 'repo';
  return `${slug}-${createHash('sha256').update(identity).digest('hex').slice(0, 16)}`;
}

/** The home's key for a run of the repository at `repoPath` started with `env`; throws on a malformed scope. */
export function providerHomeKey(repoPath: string, env: NodeJS.ProcessEnv): string {
  const scope = isCliRun(env) ? setting(env, 'SVC_PROVIDER_HOME_SCOPE') : undefined;
  if (scope) return `scope-${scope}`;
  if (isRoutedRepoName(env)) return keyOf(env.SVC_REPO_NAME!.replace('/', '-'), `served:${env.SVC_REPO_NAME}`);
  let real = repoPath;
  try {
    real = realpathSync(repoPath);
  } catch {
    // a checkout that is gone by now: its path as recorded is still its identity
  }
  return keyOf(basename(real), `path:${real}`);
}

/** `~/.svc/homes/<provider>/<key>`, for a built-in CLI by its name. */
export function providerHomeDir(env: NodeJS.ProcessEnv, repoPath: string, provider: { kind: string }): string {
  return join(svcHomeOf(env), 'homes', provider.kind, providerHomeKey(repoPath, env));
}

/** The operator's template for what the CLIs obey: ~/.svc/provider-template when it is a folder, else HOME itself. */
export function providerTemplate(env: NodeJS.ProcessEnv, home: string): string {
  const explicit = join(svcHomeOf(env), 'provider-template');
  try {
    if (statSync(explicit).isDirectory()) return explicit;
  } catch {
    // none: the user's own CLI folders are the template
  }
  return home;
}
