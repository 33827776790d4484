// `svc gate serve`: the egress gate as its own server (docs/gate.md "svc gate serve"). svc's own runs start a gate per
// run by themselves; this one is for Kubernetes job pods.
import { parseFlags, subcommand, type CliIo } from './io.ts';
import { UsageError } from '../errors.ts';

// test/unit/settings-registry.test.ts checks that this help names every variable serve reads.
export const HELP = `Usage: svc gate serve [options]

Runs the egress gate as an HTTP proxy (CONNECT, absolute-form HTTP, and
/_model/<api>/… with the real key added): what Kubernetes job pods reach out
through. Every connection is one JSON line on stdout.

Options:
  --host HOST      bind address (SVC_GATE_HOST, default 127.0.0.1); give
                   0.0.0.0 only where a NetworkPolicy admits the run pods alone
  --port PORT      port, 0 for any free one (SVC_GATE_PORT, default 3128)
  --policy FILE    {"allow": [...], "deny": [...], "repos": {"<name>": {...}}}
                   host patterns, per served repository
                   (SVC_GATE_POLICY_FILE; default: the model APIs only)
  --per-job N      client connections one job may hold at once
                   (SVC_GATE_MAX_PER_JOB, default 32; 256 in all)
  --help           this help

Every client presents its job's credential, minted by the trigger server
with the secret both read from SVC_GATE_SECRET_FILE (required, ≥ 32 bytes);
anonymous clients get 407. GET /metrics (Prometheus) needs the bearer token
in SVC_GATE_METRICS_TOKEN_FILE; unset, it is not served. Model keys come from the environment
(ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, …), base URLs from
ANTHROPIC_BASE_URL, OPENAI_BASE_URL, GOOGLE_GEMINI_BASE_URL. See docs/gate.md.

Also read: the daily caps SVC_BUDGET_REPO_DAY_USD and SVC_BUDGET_SERVER_DAY_USD,
kept across restarts in SVC_GATE_STATE_DIR, priced by SVC_PRICES_FILE; the access
log SVC_ACCESS_LOG; traces OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME,
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_TRACES_EXPORTER.
`;

export default async function gate(io: CliIo): Promise<number> {
  const parsed = subcommand(io, HELP, 'gate', ['serve']);
  if (typeof parsed === 'number') return parsed;
  const { values } = parseFlags(parsed.rest, {
    host: { type: 'string' },
    port: { type: 'string' },
    policy: { type: 'string' },
    'per-job': { type: 'string' },
  }, 0);
  const { gateAddress, serveGateForever } = await import('../gate/main.ts');
  const { GatePolicyError } = await import('../gate/policy.ts');
  const { serveOnFreePort } = await import('./dashboard.ts');
  const where = gateAddress(values, io.env);
  try {
    return await serveOnFreePort('gate', where, io.env, () => serveGateForever(values, where, io.env, io.stdout));
  } catch (err) {
    // A policy error only: a module the gate cannot load is a broken install, not the operator's policy.
    if (err instanceof GatePolicyError) throw new UsageError(`Gate policy: ${err.message}`);
    throw err;
  }
}
