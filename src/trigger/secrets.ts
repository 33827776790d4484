// Route secrets from the environment: missing → the route answers 503 naming the variable; any two equal → every
// member of the pair is disabled (spec "Authentication": a secret equal to another disables its route).
import { readFileSync } from 'node:fs';
import { decodeChatbKey } from './verify.ts';

export const ROUTES = ['errtrack', 'chata', 'trackera', 'trackerb', 'chatb', 'webhook', 'jobs'] as const;
export type RouteName = (typeof ROUTES)[number];

export interface RouteSecret {
  /** The variable an operator sets (named in 503 replies and logs; its value never is). */
  variable: string;
  value: string | undefined;
  /** Why the route cannot serve, or null when it can. */
  unavailable: string | null;
}

export type RouteSecrets = Record<RouteName, RouteSecret>;

export interface SecretProblems {
  warnings: string[];
  errors: string[];
}

function readTokenFile(path: string, problems: SecretProblems): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim() || undefined;
  } catch (err) {
    problems.errors.push(`SVC_API_TOKEN_FILE could not be read: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    return undefined;
  }
}

function pick(
  env: NodeJS.ProcessEnv, primary: string, fallback?: string,
): { variable: string; value: string | undefined } {
  if (env[primary]) return { variable: primary, value: env[primary] };
  if (fallback && env[fallback]) return { variable: fallback, value: env[fallback] };
  return { variable: primary, value: undefined };
}

export function resolveRouteSecrets(env: NodeJS.ProcessEnv): { secrets: RouteSecrets; problems: SecretProblems } {
  const problems: SecretProblems = { warnings: [], errors: [] };
  const api = env.SVC_API_TOKEN
    ? { variable: 'SVC_API_TOKEN', value: env.SVC_API_TOKEN }
    : env.SVC_API_TOKEN_FILE
      ? { variable: 'SVC_API_TOKEN_FILE', value: readTokenFile(env.SVC_API_TOKEN_FILE, problems) }
      : { variable: 'SVC_API_TOKEN', value: undefined };
  const raw: Record<RouteName, { variable: string; value: string | undefined }> = {
    errtrack: pick(env, 'SVC_ERRTRACK_WEBHOOK_SECRET', 'ERRTRACK_CLIENT_SECRET'),
    chata: pick(env, 'CHATA_SIGNING_SECRET'),
    trackera: pick(env, 'TRACKERA_WEBHOOK_SECRET'),
    trackerb: pick(env, 'TRACKERB_WEBHOOK_SECRET'),
    chatb: pick(env, 'CHATB_SECURITY_TOKEN'),
    webhook: pick(env, 'GITHUB_WEBHOOK_SECRET'),
    jobs: api,
  };
  const secrets = {} as RouteSecrets;
  for (const route of ROUTES) {
    const { variable, value } = raw[route];
    let unavailable: string | null = null;
    if (!value) {
      unavailable = `Route /${route} is not configured: set ${variable}`;
      problems.warnings.push(`${variable} is not set: /${route} answers 503 not_configured`);
    } else if (route === 'chatb' && !decodeChatbKey(value)) {
      unavailable = `Route /chatb is disabled: ${variable} is not valid base64`;
      problems.errors.push(unavailable);
    }
    secrets[route] = { variable, value, unavailable };
  }
  for (let i = 0; i < ROUTES.length; i++) {
    for (let j = i + 1; j < ROUTES.length; j++) {
      const a = secrets[ROUTES[i]!];
      const b = secrets[ROUTES[j]!];
      if (!a.value || a.value !== b.value) continue;
      const reason = `${a.variable} and ${b.variable} are equal; every secret must differ`;
      for (const [s, name] of [[a, ROUTES[i]!], [b, ROUTES[j]!]] as const) {
        s.unavailable = `Route /${name} is disabled: ${reason}`;
      }
      problems.errors.push(`Disabled /${ROUTES[i]} and /${ROUTES[j]}: ${reason}`);
    }
  }
  return { secrets, problems };
}
