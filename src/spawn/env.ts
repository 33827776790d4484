// The one place that decides a child's environment (DESIGN §7a). Every child svc starts asks here.
//
// Why a denylist of svc's own names plus every SVC_* variable: providers need their own logins
// (ANTHROPIC_API_KEY, OPENAI_API_KEY, HOME, PATH…), which svc cannot enumerate; svc's secrets it can.

/** Credentials svc itself reads; no child ever receives them through its environment. */
export const SVC_SECRET_NAMES: ReadonlySet<string> = new Set([
  'SVC_CONTROL_TOKEN', 'SVC_CONTROL_TOKEN_FILE', 'SVC_API_TOKEN', 'SVC_API_TOKEN_FILE',
  'ERRTRACK_AUTH_TOKEN', 'ERRTRACK_CLIENT_SECRET', 'SVC_ERRTRACK_WEBHOOK_SECRET',
  'GITHUB_TOKEN', 'GH_TOKEN', 'GITHUB_WEBHOOK_SECRET', 'TRACKERA_API_KEY', 'TRACKERA_WEBHOOK_SECRET',
  'TRACKERB_API_TOKEN', 'TRACKERB_WEBHOOK_SECRET', 'TRACKERB_EMAIL', 'CHATA_SIGNING_SECRET', 'CHATB_SECURITY_TOKEN',
]);

/** SVC_* variables an untrusted child may still see (they carry no credential). */
const SVC_NAMES_PASSED: ReadonlySet<string> = new Set(['SVC_SOURCE']);

/** What a child is, which decides what it may inherit. */
export type ChildKind =
  | 'agent' // a provider or a check: untrusted, sandboxed
  | 'tool' // git, gh, curl started by svc itself for its own work
  | 'svc'; // svc starting itself (the detached worker, the job launcher, the run controller)

/** True when `name` must never reach any child's environment. */
export function isSecretName(name: string): boolean {
  return SVC_SECRET_NAMES.has(name) || name.endsWith('_FILE') && SVC_SECRET_NAMES.has(name.slice(0, -5));
}

/**
 * The environment for a child of `kind`: `base` minus svc's credentials, plus `extra`.
 * Agents and tools also lose every other SVC_* variable; svc's own children keep the non-secret ones
 * (SVC_ORIGIN, SVC_HOME…) because they configure the child svc.
 * Secrets a child svc needs travel through a pipe or a 0600 file, never through this function.
 */
export function childEnv(kind: ChildKind, base: NodeJS.ProcessEnv, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(base)) {
    if (value === undefined || isSecretName(key)) continue;
    if (kind !== 'svc' && key.startsWith('SVC_') && !SVC_NAMES_PASSED.has(key)) continue;
    env[key] = value;
  }
  for (const [key, value] of Object.entries(extra)) env[key] = value;
  return env;
}
