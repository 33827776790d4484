// The per-server bounds on connections (DESIGN-style table in README "Known limits"): read from SVC_<SERVER>_* once at
// startup, each an integer in a range, so a typo fails the start instead of silently lifting a bound.
import { BadSettingError } from '../errors.ts';

export interface ConnectionLimits {
  /** Open connections of the whole server. */
  total: number;
  /** Open connections from one peer address. */
  perPeer: number;
}

/**
 * 4,096 stays well under the usual descriptor limit; 1,024 per peer leaves room for the bench's 1,000 SSE
 * subscribers on one loopback address while one remote address still cannot take the whole server.
 */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = { total: 4_096, perPeer: 1_024 };

/** An integer setting from the environment, or its default; out of range or not an integer throws BadSettingError. */
export function envInteger(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max) {
    throw new BadSettingError(`${name} must be an integer from ${min} to ${max} (got "${text}")`);
  }
  return n;
}

/** `SVC_CONTROL` or `SVC_TRIGGER` + `_MAX_CONNECTIONS` and `_MAX_CONNECTIONS_PER_PEER`. */
export function readConnectionLimits(env: NodeJS.ProcessEnv, prefix: 'SVC_CONTROL' | 'SVC_TRIGGER'): ConnectionLimits {
  const total = envInteger(env, `${prefix}_MAX_CONNECTIONS`, DEFAULT_CONNECTION_LIMITS.total, 1, 1_000_000);
  const fallback = Math.min(DEFAULT_CONNECTION_LIMITS.perPeer, total);
  const perPeer = envInteger(env, `${prefix}_MAX_CONNECTIONS_PER_PEER`, fallback, 1, total);
  return { total, perPeer };
}
