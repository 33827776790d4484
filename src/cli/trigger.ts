// `svc trigger serve`: the webhook trigger server (DESIGN §5). Flags win over SVC_TRIGGER_* variables.
import { parseFlags, subcommand, type CliIo } from './io.ts';
import { SOURCES, type WebhookSource } from '../webhook-sources.ts';

const SIGNED = SOURCES.filter((s: WebhookSource) => s.families).map((s) => `/${s.name}`).join(', ');

// test/unit/settings-registry.test.ts checks that this help names every variable serve reads.
export const HELP = `Usage: svc trigger serve [options]

Accepts signed webhooks (${SIGNED}) and POST /jobs,
queues them durably and runs each as \`svc start … --detach\` in the project, then reports back.

Options:
  --host HOST         bind address (SVC_TRIGGER_HOST, default 127.0.0.1)
  --port PORT         port, 0 for any free one (SVC_TRIGGER_PORT, default 7373)
  --repos FILE        served repositories file (SVC_TRIGGER_REPOS, default ~/.svc/trigger/repos.conf
                      when it exists); edit it with \`svc repos\`: a change applies from the next delivery
  --repo DIR          serve this one checkout instead (SVC_TRIGGER_REPO; without either, the current directory)
  --concurrency N     jobs running at once (SVC_TRIGGER_CONCURRENCY, default 2)
  --db PATH           job database (SVC_TRIGGER_DB, default ~/.svc/trigger/trigger.db)
  --help              this help

Secrets come from the environment, never a flag (SVC_API_TOKEN or SVC_API_TOKEN_FILE, SVC_CONTROL_TOKEN or
SVC_CONTROL_TOKEN_FILE: a file read once); see docs/trigger.md for every route and variable.

Environment beyond the options' (the README's settings tables say what each does):
  routes' secrets: GITHUB_WEBHOOK_SECRET, SVC_ERRTRACK_WEBHOOK_SECRET or ERRTRACK_CLIENT_SECRET,
    TRACKERA_WEBHOOK_SECRET, TRACKERB_WEBHOOK_SECRET, CHATA_SIGNING_SECRET, CHATB_SECURITY_TOKEN
  whose deliveries: CHATA_TEAM_IDS, ERRTRACK_INSTALLATION_IDS, TRACKERA_ORGANIZATION_IDS, TRACKERB_SITES,
    TRACKERB_ASSIGNEES, TRACKERB_LABELS
  replies: SVC_PUBLIC_URL, CHATA_HOOKS_PREFIX, CHATA_BOT_TOKEN, TRACKERA_API_KEY, TRACKERA_API_URL,
    TRACKERB_BASE_URL, TRACKERB_EMAIL, TRACKERB_API_TOKEN, GITHUB_TOKEN or GH_TOKEN, GITHUB_API_URL
  the Control Plane: SVC_CONTROL_URL, SVC_CONTROL_PORT, SVC_SOURCE
  jobs: SVC_TRIGGER_REPO_CONCURRENCY, SVC_TRIGGER_QUEUE_MAX, SVC_TRIGGER_DEDUPE_DAYS, SVC_TRIGGER_JOB_DAYS,
    SVC_TRIGGER_CHECKOUTS, SVC_TRIGGER_CLI, SVC_TRIGGER_EXECUTOR (kubernetes: and the variables of docs/deploy.md)
  the server: SVC_TRIGGER_MAX_CONNECTIONS, SVC_TRIGGER_MAX_CONNECTIONS_PER_PEER, SVC_ACCESS_LOG
  traces: OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
    OTEL_SERVICE_NAME, OTEL_TRACES_EXPORTER
`;

export default async function trigger(io: CliIo): Promise<number> {
  const parsed = subcommand(io, HELP, 'trigger', ['serve']);
  if (typeof parsed === 'number') return parsed;
  const { values } = parseFlags(parsed.rest, {
    host: { type: 'string' }, port: { type: 'string' }, repo: { type: 'string' }, repos: { type: 'string' },
    concurrency: { type: 'string' }, db: { type: 'string' },
  }, 0);
  const { resolveTriggerSettings } = await import('../trigger/settings.ts');
  const settings = resolveTriggerSettings(io.env, values, process.cwd());
  const { serveTriggerForever } = await import('../trigger/main.ts');
  const { serveOnFreePort } = await import('./dashboard.ts');
  return serveOnFreePort('trigger', settings, io.env, () => serveTriggerForever(settings, io.env, io.stdout));
}
