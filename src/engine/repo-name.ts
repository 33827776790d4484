// The repository name a run records (its `repo`, what the Control Plane lists and filters by). A run the trigger
// server started is named by the served entry its job was routed to, which the launcher passes as
// SVC_REPO_NAME; anything else is named from the checkout's origin (git.ts repoName).
import { isWebhookOrigin } from './spec.ts';
import { repoName } from './git.ts';

// GitHub's own limits: an owner is 1-39 alphanumerics or single hyphens; a name 1-100 of [A-Za-z0-9._-].
const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$/;
const NAME = /^[A-Za-z0-9._-]{1,100}$/;

export function isRepoName(text: string): boolean {
  const [owner, name, extra] = text.split('/');
  if (extra !== undefined || !owner || !name) return false;
  return OWNER.test(owner) && NAME.test(name) && name !== '.' && name !== '..' && !name.toLowerCase().endsWith('.git');
}

/**
 * SVC_REPO_NAME counts only for a run a trigger server started (a webhook origin, which only a launcher sets): a
 * person's shell or the Control Plane (which never passes it) gets the checkout's name. The repository's content
 * cannot reach it: it is the launcher's environment, read before any file of the checkout is.
 */
export function runRepoName(dir: string, env: NodeJS.ProcessEnv): string {
  return isRoutedRepoName(env) ? env.SVC_REPO_NAME! : repoName(dir);
}

/** Whether the run's name is the one a trigger server routed its job to (see runRepoName). */
export function isRoutedRepoName(env: NodeJS.ProcessEnv): boolean {
  const routed = env.SVC_REPO_NAME;
  return isWebhookOrigin(env.SVC_ORIGIN) && routed !== undefined && isRepoName(routed);
}
