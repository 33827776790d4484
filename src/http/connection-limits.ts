// The per-server bounds on connections (README "Known limits"): read once at startup from the settings registry, so a
// typo fails the start instead of silently lifting a bound.
import { SETTINGS, settingInt } from '../settings-registry.ts';

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
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  total: SETTINGS.SVC_CONTROL_MAX_CONNECTIONS.default, perPeer: SETTINGS.SVC_CONTROL_MAX_CONNECTIONS_PER_PEER.default,
};

/** The server's `_MAX_CONNECTIONS` and `_MAX_CONNECTIONS_PER_PEER`. */
export function readConnectionLimits(env: NodeJS.ProcessEnv, server: 'control' | 'trigger'): ConnectionLimits {
  const [all, peer] = server === 'control'
    ? ['SVC_CONTROL_MAX_CONNECTIONS', 'SVC_CONTROL_MAX_CONNECTIONS_PER_PEER'] as const
    : ['SVC_TRIGGER_MAX_CONNECTIONS', 'SVC_TRIGGER_MAX_CONNECTIONS_PER_PEER'] as const;
  const total = settingInt(env, all);
  return { total, perPeer: settingInt(env, peer, { max: total }) };
}
