// The environment a provider (and a check) gets; the rule itself lives in the one spawn policy (src/spawn/).
import { childEnv } from '../spawn/index.ts';

/** Providers keep their own logins (HOME, their API keys); svc's tokens and webhook secrets never reach them. */
export function providerEnv(base: NodeJS.ProcessEnv, extra: Record<string, string>): NodeJS.ProcessEnv {
  return childEnv('agent', base, extra);
}
