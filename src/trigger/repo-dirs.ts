// Where a served repository's files live on this host: its own checkout, or for a clone URL the folder svc keeps
// under the trigger's state folder (managed-checkout.ts). One home for these paths.
import { join } from 'node:path';
import type { ServedRepo } from './served-repos-file.ts';

/** `<stateDir>/repos/<owner>/<name>`: a managed repository's mirror, job worktrees and intake files. */
export function managedDir(stateDir: string, repo: ServedRepo): string {
  const [owner, name] = repo.name.toLowerCase().split('/') as [string, string];
  return join(stateDir, 'repos', owner, name);
}

/**
 * The folder whose `.svc/inbox` receives a delivery's files before its job runs (a trackera snapshot): the checkout,
 * or the managed folder, from which each job's worktree gets them at launch.
 */
export function intakeDir(stateDir: string, repo: ServedRepo): string {
  return repo.checkout ?? managedDir(stateDir, repo);
}
