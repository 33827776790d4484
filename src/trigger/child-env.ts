// The environment a `svc start` child of the trigger server gets (SVC_ORIGIN is set per job by the executor): the spawn
// policy's 'launcher' allowlist, so no webhook secret, API key or token can reach it (DESIGN §5, §7a).
import { childEnv, isLauncherName } from '../spawn/env.ts';

export function isAllowedChildVar(name: string): boolean {
  return isLauncherName(name);
}

export function buildChildEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return childEnv('launcher', env);
}
