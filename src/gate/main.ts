// `svc gate serve`: the egress gate as a server of its own, for runs that are not svc's children: Kubernetes job pods
// reach out only through it (scripts/k8s/gate.yaml, a NetworkPolicy allows them DNS, the Control Plane and this).
// Reads its configuration once: the policy file, the model keys and base URLs from the environment.
import { readFileSync } from 'node:fs';
import { startGate } from './gate.ts';
import { parseGatePolicy, type GatePolicy } from './policy.ts';
import { modelRoutesFromEnv } from './model-apis.ts';
import { createLogger } from '../log.ts';
import { exitCodeAfterSignal } from '../http/exit-on-signal.ts';

export interface GateServeSettings {
  host: string;
  port: number;
  /** A JSON file `{"allow": [...], "deny": [...]}`; null: no network but the model APIs. */
  policyFile: string | null;
}

/** Bases the operator set for the model APIs (a self-hosted endpoint); the rest use each API's own origin. */
const BASE_VARS: Record<string, string> = {
  anthropic: 'ANTHROPIC_BASE_URL', openai: 'OPENAI_BASE_URL', gemini: 'GOOGLE_GEMINI_BASE_URL',
};

export function loadGatePolicy(path: string | null): GatePolicy {
  if (path === null) return { allow: [], deny: [] };
  return parseGatePolicy(JSON.parse(readFileSync(path, 'utf8')) as { allow?: unknown; deny?: unknown });
}

/** Serves until SIGINT/SIGTERM; every connection is one JSON log line on stdout (the pod's log is the evidence). */
export async function serveGateForever(
  settings: GateServeSettings, env: NodeJS.ProcessEnv, say: (text: string) => void,
): Promise<number> {
  const log = createLogger('gate');
  const bases: Record<string, string> = {};
  for (const [name, variable] of Object.entries(BASE_VARS)) if (env[variable]) bases[name] = env[variable]!;
  const routes = modelRoutesFromEnv(env, { bases });
  const policy = loadGatePolicy(settings.policyFile);
  const own = routes.map((r) => r.base.host);
  const gate = await startGate({
    policy: { allow: [...policy.allow, ...parseGatePolicy({ allow: own }).allow], deny: policy.deny },
    tcpPort: settings.port,
    tcpHost: settings.host,
    models: routes,
    onRecord: (record) => process.stdout.write(`${JSON.stringify({ egress: record })}\n`),
    log,
  });
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  say(`svc gate listening on http://${host}:${gate.port}` +
    ` (model APIs: ${routes.map((r) => r.name).join(', ') || 'none'})\n`);
  return exitCodeAfterSignal(log, 'gate stopping', () => gate.close());
}
