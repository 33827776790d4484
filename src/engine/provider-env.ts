// The environment a provider (and a check) gets: ours minus every credential the engine holds for itself.
const SECRET_NAMES = new Set([
  'SVC_CONTROL_TOKEN', 'SVC_CONTROL_TOKEN_FILE', 'SVC_API_TOKEN', 'SVC_API_TOKEN_FILE', 'ERRTRACK_AUTH_TOKEN', 'ERRTRACK_CLIENT_SECRET',
  'SVC_ERRTRACK_WEBHOOK_SECRET', 'GITHUB_TOKEN', 'GH_TOKEN', 'GITHUB_WEBHOOK_SECRET', 'TRACKERA_API_KEY', 'TRACKERA_WEBHOOK_SECRET',
  'TRACKERB_API_TOKEN', 'TRACKERB_WEBHOOK_SECRET', 'TRACKERB_EMAIL', 'CHATA_SIGNING_SECRET', 'CHATB_SECURITY_TOKEN',
]);

/** Providers keep their own logins (HOME, their API keys); svc's tokens and webhook secrets never reach them. */
export function providerEnv(base: NodeJS.ProcessEnv, extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(base)) {
    if (value === undefined || SECRET_NAMES.has(key)) continue;
    if (key.startsWith('SVC_') && !['SVC_SOURCE'].includes(key)) continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}
