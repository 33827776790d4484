// Route secrets from the environment: missing → the route answers 503 naming the variable; any two equal → every
// member of the pair is disabled (spec "Authentication": a secret equal to another disables its route).
import { readFileSync } from 'node:fs';
import { decodeChatbKey, SOURCE_NAMES, sourceOf, type SourceName } from '../webhook-sources.ts';

/** Every route that can start a job, in the source table's order (src/webhook-sources.ts). */
export const ROUTES = SOURCE_NAMES;
export type RouteName = SourceName;

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

function readTokenFile(variable: string, path: string, problems: SecretProblems): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim() || undefined;
  } catch (err) {
    problems.errors.push(`${variable} could not be read: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    return undefined;
  }
}

/** The first of the route's variables that is set, else its file variable's file, else the first (unset). */
function pick(
  env: NodeJS.ProcessEnv, route: RouteName, problems: SecretProblems,
): { variable: string; value: string | undefined } {
  const { secret, secretFile } = sourceOf(route);
  const variable = secret.find((name) => env[name]);
  if (variable) return { variable, value: env[variable] };
  if (secretFile && env[secretFile]) {
    return { variable: secretFile, value: readTokenFile(secretFile, env[secretFile], problems) };
  }
  return { variable: secret[0]!, value: undefined };
}

export function resolveRouteSecrets(env: NodeJS.ProcessEnv): { secrets: RouteSecrets; problems: SecretProblems } {
  const problems: SecretProblems = { warnings: [], errors: [] };
  const secrets = {} as RouteSecrets;
  for (const route of ROUTES) {
    const { variable, value } = pick(env, route, problems);
    let unavailable: string | null = null;
    if (!value) {
      unavailable = `Route /${route} is not configured: set ${variable}`;
      problems.warnings.push(`${variable} is not set: /${route} answers 503 not_configured`);
    } else if (sourceOf(route).secretForm === 'base64' && !decodeChatbKey(value)) {
      unavailable = `Route /${route} is disabled: ${variable} is not valid base64`;
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
