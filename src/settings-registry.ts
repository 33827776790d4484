// The one table of the environment svc reads, and the typed readers that parse a variable (a bad value is a
// BadSettingError naming it: exit 2). The README's tables are written from it (`npm run docs:settings`); its test
// fails when they are stale or an entry is read nowhere. A leaf: every floor reads settings.
import { readFileSync } from 'node:fs';
import { BadSettingError } from './errors.ts';
import { SOURCES } from './webhook-sources.ts';
import { SEGMENT } from './run-json.ts';
import { shownValue } from './one-line.ts';

/** The README's sections (scripts/docs-settings.ts titles them). */
export type SettingGroup = 'control' | 'engine' | 'trigger' | 'kubernetes' | 'gate' | 'svc' | 'packaging';

export interface Setting {
  group: SettingGroup;
  /** Markdown, as the README shows it; for an integer, the value its reader falls back to. */
  default: string | number;
  meaning: string;
  /** `svc`: set by svc for a process it starts; else the operator, in svc's environment. */
  by: 'operator' | 'svc';
  /** An integer's range; a choice's values (the first is the default); the command-line flag that wins. */
  range?: readonly [number, number];
  choices?: readonly string[];
  flag?: string;
  /** What a text value must match (a RegExp, or a test of its own), and how the error says it. */
  pattern?: readonly [{ test(value: string): boolean }, string];
  /** The default as the docs say it, where another setting decides it. */
  shown?: string;
  /** A credential: read once at start, never passed to an agent or a tool (src/spawn/start.ts, cli/node-setup.ts). */
  secret?: true;
}

const NONE = '—';
const USD: readonly [RegExp, string] = [/^\d{1,9}(\.\d{1,6})?$/, 'an amount of US dollars, like `25` or `2.50`'];
const HTTP_ADDRESS = /^https?:\/\/(\[[0-9a-f:.]+\]|[\w.~%-]+)(:\d{1,5})?(\/[^\s?#]*)?$/i;
/**
 * An http(s) address Node's URL parser takes: the shape, then the parser, which also refuses what the shape lets by
 * (a port past 65535, a broken IPv6 literal). `spaced`: spaces around it (an env file's), which its readers trim.
 */
function httpAddress(spaced: boolean, said: string): readonly [{ test(value: string): boolean }, string] {
  const test = (value: string) => {
    const address = spaced ? value.trim() : value;
    return HTTP_ADDRESS.test(address) && URL.canParse(address);
  };
  return [{ test }, said];
}
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const HOST = '[a-z0-9-]+(\\.[a-z0-9-]+)+(:\\d{1,5})?';
/** One or more of `one`, comma-separated, spaces around the commas allowed. */
function commaList(one: string): RegExp {
  return new RegExp(`^${one}(\\s*,\\s*${one})*$`, 'i');
}
/** A run source, as run addresses `<source>/<run>` take it. */
const SOURCE: readonly [RegExp, string] = [SEGMENT, 'letters, digits, ".", "_" or "-"'];
const text = (group: SettingGroup, dflt: string, meaning: string, flag?: string) =>
  ({ group, default: dflt, meaning, by: 'operator', ...(flag ? { flag } : {}) }) as const;
const int = (group: SettingGroup, dflt: number, range: readonly [number, number], meaning: string, flag?: string) =>
  ({ group, default: dflt, meaning, by: 'operator', range, ...(flag ? { flag } : {}) }) as const;
const choice = <C extends string>(group: SettingGroup, choices: readonly [C, ...C[]], meaning: string) =>
  ({ group, default: `\`${choices[0]}\``, meaning, by: 'operator', choices }) as const;
const secret = (group: SettingGroup, dflt: string, meaning: string) =>
  ({ ...text(group, dflt, meaning), secret: true }) as const;
const bySvc = (meaning: string) => ({ group: 'svc', default: NONE, meaning, by: 'svc' }) as const;

export const SETTINGS = {
  SVC_CONTROL_HOST: text('control', '`127.0.0.1`', 'bind address of `svc control serve`', '--host'),
  SVC_CONTROL_PORT: int('control', 47821, [0, 65535],
    'listen port, and the port clients assume (a bad value, or 0, stops a client with exit 2; a bad value stops ' +
    '`svc trigger serve` too when `SVC_CONTROL_URL` is unset, as each run it starts would fail)', '--port'),
  SVC_CONTROL_DB: text('control', '`~/.svc/control/control.db`', 'database file', '--db'),
  SVC_CONTROL_TOKEN: secret('control', NONE,
    'bearer token for `/v1/*`; required for a non-loopback bind; sent by clients and the shipper when set'),
  SVC_CONTROL_TOKEN_FILE: secret('control', '`~/.svc/control/token`', 'file holding the token (first line): ' +
    'the Control Plane and the trigger server read it only when this is set and `SVC_CONTROL_TOKEN` is not ' +
    '(unreadable or empty: exit 2), never the default file: a Control Plane wants a token only when one is set; ' +
    'the shipper and the CLI read it first (the default file only for a loopback Control Plane named by ' +
    '`SVC_CONTROL_URL` or `SVC_CONTROL_PORT`, or recorded by a live `server.json`)'),
  SVC_CONTROL_ALLOW_INSECURE_BIND: choice('control', ['0', '1'],
    '`1` accepts a tokenless non-loopback bind (loud warning; not recommended)'),
  SVC_CONTROL_ANSWER_DIR: text('control', '`~/.svc/control/answers`',
    'where answers for blocked runs are written (`<source>/<run>.json`) and runs wait for them'),
  SVC_CONTROL_RUNNER_TOKENS_FILE: secret('control', NONE, 'a file of `<source> <token> [bound-runs] ' +
    '[read=<source>,…]` lines: tokens that may only `POST /v1/ingest` runs of their source, and read the runs of ' +
    'the sources `read=` names ([runner tokens](#control-plane-api))'),
  SVC_CONTROL_MAX_CONNECTIONS: int('control', 4096, [1, 1_000_000],
    'open connections the Control Plane keeps; one more is answered 503 and closed ([known limits](#known-limits))'),
  SVC_CONTROL_MAX_CONNECTIONS_PER_PEER: int('control', 1024, [1, 1_000_000],
    'open connections from one peer address (at most `SVC_CONTROL_MAX_CONNECTIONS`)'),
  SVC_CONTROL_MAX_STREAMS: int('control', 2000, [1, 1_000_000],
    'event streams (`/v1/stream`, run streams, each run an MCP listen watches) open at once; one more is answered 429'),
  SVC_CONTROL_MAX_STREAMS_PER_RUN: int('control', 100, [1, 1_000_000],
    'event streams of one run open at once (at most `SVC_CONTROL_MAX_STREAMS`)'),
  SVC_CONTROL_AUDIT_RETENTION_DAYS: int('control', 365, [0, 36_500], 'audit rows older than this are pruned hourly, ' +
    'anchored so the chain still verifies; `0` keeps them all. Not a `PUT /v1/config` key on purpose: whoever may ' +
    'change the config cannot shorten the record of it'),
  SVC_ACCESS_LOG: choice('control', ['0', '1'], '`1`: `svc control serve`, `svc trigger serve` and `svc gate serve` ' +
    'log one `request` line per request on stderr: method, route template, status, duration, bytes, request id, ' +
    'peer; never a path, query, header or body ([metrics](docs/deploy.md#metrics-and-the-access-log))'),
  OTEL_EXPORTER_OTLP_ENDPOINT: text('control', NONE, 'set: the trigger server, the run workers and `svc gate serve` ' +
    'export OpenTelemetry traces to `<this>/v1/traces` (OTLP/HTTP JSON; [traces](docs/deploy.md#traces))'),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: text('control', NONE,
    'the full traces URL, used as it is; wins over `OTEL_EXPORTER_OTLP_ENDPOINT`'),
  OTEL_EXPORTER_OTLP_HEADERS: secret('control', NONE,
    '`key=value,…` headers sent with every export (a collector\'s API key): read once, never logged, never put in ' +
    'a job pod (the pods\' gate holds its own)'),
  OTEL_SERVICE_NAME: text('control', '`svc-trigger` / `svc-run` / `svc-gate`', 'the `service.name` of exported spans'),
  OTEL_TRACES_EXPORTER: text('control', '`otlp`', '`none`: export no traces even with an endpoint set'),
  SVC_CONTROL_URL: { ...text('control', 'discovery', 'where clients, the shipper and the trigger server reach the ' +
    'Control Plane. Discovery: this, then `~/.svc/control/server.json` while the server that wrote it runs ' +
    '([deploy](docs/deploy.md)), then `SVC_CONTROL_PORT`'),
  // Any case, spaces around (an env file's), a compose service's `_`: forms its readers (which trim) always took.
  // A zone id (`[fe80::1%25eth0]`) is refused: Node's URL parser, and so fetch, cannot take one.
  pattern: httpAddress(true, 'an `http://` or `https://` address like `http://127.0.0.1:47821`; an IPv6 zone id ' +
    '(`[fe80::1%25eth0]`) is not supported, as Node\'s URL parser refuses it') },
  SVC_SOURCE: { ...text('control', '`local`', 'the name of this instance in run addresses `<source>/<run>`'),
    pattern: SOURCE },
  BROWSER: text('control', '`xdg-open` / `open`',
    'program `svc dashboard` opens the URL with (first `:`-separated entry, no shell)'),
  NODE_OPTIONS: text('control', NONE,
    'a `--max-semi-space-size` given here (or on the `node` command line) wins; the Control Plane re-executes ' +
    'only to add what is missing (`--memory-saver-mode`: `--no-memory-saver-mode` on the `node` command line keeps ' +
    'it off, as `--allocation-site-pretenuring` there keeps pretenuring on)'),
  HOME: text('control', 'the OS home', '`~/.svc/`: keys, databases, `server.json`, answers, provider homes'),

  ERRTRACK_AUTH_TOKEN: secret('engine', NONE, 'token for fetching an error-tracker issue URL; without it nothing is ' +
    'fetched (exit 2). Sent only to the tracker host, through `curl --config -` on stdin; never for a chat\'s or ' +
    'another sender\'s run: the CLI and the Control Plane fetch one, and a trigger job only when its input is the ' +
    'issue\'s URL, not forced to a brief, and it came from `/jobs` or the errtrack webhook (`jobMayFetchIssue`, ' +
    'src/trigger/executor.ts; so neither a `/jobs` `--brief` nor an errtrack alert\'s "Fix errtrack …" brief does)'),
  ERRTRACK_URL: text('engine', '`sentry.io` hosts', 'error-tracker API base; required for issue URLs on other ' +
    'hosts (the token goes only to sentry.io hosts or this host)'),
  TRACKERA_API_KEY: secret('engine', NONE, 'reads a `trackera:<id>` issue when no saved snapshot exists (not for a ' +
    'chat\'s or another sender\'s run); for the trigger server, a result comment on the trackera issue, and the ' +
    'check of who may `/svc answer` there (without it every such answer is refused)'),
  TRACKERA_API_URL: text('engine', '`https://api.linear.app/graphql`', 'the trackera GraphQL address (https only)'),
  GITHUB_TOKEN: secret('engine', NONE, 'opens pull requests (else `gh auth token`, else `gh pr create`); also the ' +
    'Control Plane\'s merge queue, the trigger\'s fetch of a `clone=` repository on the token\'s host, and its ' +
    'pull request follow-ups (reading the PR and its review\'s comments, replying)'),
  GH_TOKEN: secret('engine', NONE, 'read when `GITHUB_TOKEN` is unset'),
  GITHUB_API_URL: { ...text('engine', '`https://api.github.com`', 'GitHub REST base; its host is the one git ' +
    'origin the token is offered to; the trigger server calls it over https only'),
  pattern: httpAddress(false, 'an `http://` or `https://` address like `https://ghe.example.com/api/v3`') },
  GIT_SSL_CAINFO: text('engine', NONE, 'a CA bundle svc\'s git and its redirect check trust (with the other `GIT_*` ' +
    'names svc\'s git inherits: [docs/engine.md](docs/engine.md#environment-the-engine-reads))'),
  SVC_INFRA_RETRY_WAIT_S: int('engine', 5, [0, 600], 'seconds a run waits before its one automatic retry after ' +
    'an `infra` failure before its agent ran ([docs/engine.md](docs/engine.md#why-a-run-failed))'),
  SVC_SHIP: choice('engine', ['1', '0'], '`0` keeps the run local: recorded in its plan, so no later command, ' +
    'resume or `svc ship` sends it, only `svc ship RUN` naming it; `1` ships it'),
  SVC_SANDBOX: choice('engine', ['bwrap', 'none'],
    '`none` runs the agent of a CLI-started run without the bwrap sandbox (loud warning); ignored for server runs'),
  SVC_SERVER_SANDBOX: choice('engine', ['bwrap', 'none'], 'set on the Control Plane or trigger server: `none` ' +
    'runs the runs it starts without the sandbox (its launchers pass it on); a repository\'s `"sandbox"` cannot'),
  SVC_PROVIDER_HOME_SCOPE: { ...text('engine', NONE, 'a person\'s `svc start` only: provider homes shared by ' +
    'every repository started with this name, instead of one per repository; ignored for server-started runs'),
  pattern: [/^[a-z0-9][a-z0-9_-]{0,63}$/, 'a simple lowercase name, `[a-z0-9_-]`'] },
  SVC_COMPILE_CACHE: choice('engine', ['1', '0'], '`0` turns off Node\'s compile cache of svc\'s modules in ' +
    '`~/.svc/compile-cache/` for every command (servers pass it to their runs); a `NODE_COMPILE_CACHE` svc was ' +
    'started with wins in that process ([docs/engine.md](docs/engine.md#nodes-compile-cache))'),

  SVC_TRIGGER_HOST: text('trigger', '`127.0.0.1`', 'bind address', '--host'),
  SVC_TRIGGER_PORT: int('trigger', 7373, [0, 65535], 'port, `0` = any free port', '--port'),
  SVC_TRIGGER_REPOS: text('trigger', '`~/.svc/trigger/repos.conf` when it exists',
    'the served repositories file; re-read when it changes', '--repos'),
  SVC_TRIGGER_REPO: text('trigger', 'cwd, when no repositories file', 'serve this one checkout instead', '--repo'),
  SVC_TRIGGER_CHECKOUTS: text('trigger', '`~/.local/share/svc/checkouts`', 'managed (`clone=`) job checkouts'),
  SVC_TRIGGER_CONCURRENCY: int('trigger', 2, [1, 64], 'jobs active at once', '--concurrency'),
  SVC_TRIGGER_REPO_CONCURRENCY: { ...int('trigger', 2, [1, 64], 'jobs of one repository active at once, at most ' +
    '`SVC_TRIGGER_CONCURRENCY`'), shown: 'all slots with one repository served, else one less' },
  SVC_TRIGGER_DB: text('trigger', '`~/.svc/trigger/trigger.db`', 'job database', '--db'),
  SVC_TRIGGER_QUEUE_MAX: int('trigger', 100, [1, 1_000_000], 'most jobs waiting, shared by the configured routes'),
  SVC_TRIGGER_DEDUPE_DAYS: int('trigger', 30, [1, 36_500], 'days a dedupe key is kept'),
  SVC_TRIGGER_JOB_DAYS: int('trigger', 30, [1, 36_500], 'days a finished job is kept (never less than the above)'),
  SVC_TRIGGER_EXECUTOR: choice('trigger', ['local', 'kubernetes'],
    'how jobs are launched: child processes, or one Kubernetes Job each (below)'),
  SVC_TRIGGER_MAX_CONNECTIONS: int('trigger', 4096, [1, 1_000_000], 'open connections the server keeps'),
  SVC_TRIGGER_MAX_CONNECTIONS_PER_PEER: int('trigger', 1024, [1, 1_000_000],
    'open connections from one peer address (at most `SVC_TRIGGER_MAX_CONNECTIONS`)'),
  SVC_TRIGGER_CLI: text('trigger', 'the `dist/cli.js` next to the server', 'the `svc` run for each job (tests)'),
  TRACKERB_ASSIGNEES: text('trigger', NONE,
    'comma-separated account ids (only the account id matches), emails (the email, or a Server/DC username) or names'),
  TRACKERB_LABELS: text('trigger', NONE, 'comma-separated labels; with neither filter every trackerb event is skipped'),
  CHATA_TEAM_IDS: { ...text('trigger', NONE, 'comma-separated chata workspace (team) ids and Enterprise Grid ' +
    'organisation ids, e.g. `T1DC2JH3J,E0ABCDEF`: only a delivery Slack sent for a workspace named (`team_id`) or ' +
    'for a workspace of an organisation named (`enterprise_id`) starts or answers a job; one from any other ' +
    'workspace the app is installed in is refused as a channel mapped to no repository. Unset: `/chata` answers 503 ' +
    '`not_configured`, but to Slack\'s signed `url_verification` challenge (one signing secret serves every ' +
    'workspace, so the signature alone cannot say whose it is)'),
  pattern: [/^[TE][A-Z0-9]{1,31}(\s*,\s*[TE][A-Z0-9]{1,31})*$/,
    'comma-separated workspace ids like `T1DC2JH3J` or organisation ids like `E0ABCDEF`'] },
  // One signing secret may serve several vendor accounts: a routing key is unique only inside one (DESIGN §7a).
  ERRTRACK_INSTALLATION_IDS: { ...text('trigger', NONE, 'errtrack (Sentry) installations, by the payload\'s ' +
    '`installation.uuid`: only a delivery for an installation named starts a job; any other is skipped ' +
    'as a project slug served nowhere, `default` or not. Unset: every installation\'s delivery is routed'),
  pattern: [commaList(UUID), 'comma-separated installation ids like `a8e5d37a-696c-4c54-adb5-b3f28d64c7de`'] },
  TRACKERA_ORGANIZATION_IDS: { ...text('trigger', NONE, 'trackera (Linear) organizations, by the payload\'s ' +
    '`organizationId`: only a delivery from an organization named starts or answers a job; any other is ' +
    'skipped as a team key served nowhere, `default` or not. Unset: every organization\'s delivery is routed'),
  pattern: [commaList(UUID), 'comma-separated organization ids like `c8986123-11f1-4eef-8227-55102f7eac46`'] },
  TRACKERB_SITES: { ...text('trigger', NONE, 'trackerb (Jira) sites, by the host of the payload\'s ' +
    '`issue.self`: only a delivery from a site named starts or answers a job; any other is ' +
    'skipped as a project key served nowhere, `default` or not. Unset: every site\'s delivery is routed'),
  pattern: [commaList(HOST), 'comma-separated hosts like `acme.atlassian.net`'] },
  CHATA_HOOKS_PREFIX: text('trigger', '`https://hooks.slack.com/`',
    'chata summaries go only to `response_url`s under this https prefix'),
  TRACKERB_BASE_URL: text('trigger', NONE, 'with the two below: a result comment on the trackerb issue, and the ' +
    'check of who may `/svc answer` there (without all three every such answer is refused) (https)'),
  TRACKERB_EMAIL: secret('trigger', NONE, 'the trackerb account the comment is posted as'),
  TRACKERB_API_TOKEN: secret('trigger', NONE, 'its API token'),
  SVC_PUBLIC_URL: text('trigger', NONE, 'the Control Plane\'s address as people reach it (https, or http on a ' +
    'non-loopback host): every link svc sends out (summaries, questions, comments, PR bodies); unset or loopback: ' +
    'the message names the run to look up on the Control Plane instead'),
  CHATA_BOT_TOKEN: secret('trigger', NONE, 'a chata bot token (`chat:write`): a question goes to the channel by ' +
    '`chat.postMessage` (a reply in its thread answers it), and a summary after the command\'s `response_url` ' +
    'expired (30 minutes)'),
  CHATA_API_URL: text('trigger', '`https://slack.com/api/`', 'the chata Web API base the bot token posts to (https)'),

  SVC_K8S_IMAGE: text('kubernetes', 'required', 'image with svc'),
  SVC_K8S_NAMESPACE: text('kubernetes', 'the service account\'s', 'namespace for Jobs'),
  SVC_K8S_SERVICE_ACCOUNT: text('kubernetes', 'the namespace\'s default', 'service account of job pods'),
  SVC_K8S_CPU: text('kubernetes', NONE, 'CPU request of job pods'),
  SVC_K8S_MEMORY: text('kubernetes', NONE, 'memory request and limit of job pods'),
  SVC_K8S_REPO_URL: text('kubernetes', NONE, 'git URL cloned for a repository without `clone=`'),
  SVC_K8S_REPO_REF: text('kubernetes', NONE, 'its branch'),
  SVC_K8S_REPO_PVC: text('kubernetes', NONE, 'or: a PersistentVolumeClaim holding that repository'),
  SVC_K8S_ENV_SECRET: text('kubernetes', NONE, 'a Secret of which the `run` container takes, by name, only the keys ' +
    'its job uses'),
  SVC_K8S_SIGNER_ENV_SECRET: text('kubernetes', NONE, 'a Secret of which the `signer` alone takes `GITHUB_TOKEN`, ' +
    '`GH_TOKEN`, `GITHUB_API_URL`'),
  SVC_K8S_CONTROL_TOKEN_SECRET: text('kubernetes', NONE, 'a Secret with key `token`, mounted for the shippers'),
  SVC_K8S_RUN_CONTROL_TOKEN_SECRET: text('kubernetes', NONE, 'a Secret with key `token` (a `bound-runs` runner ' +
    'token), mounted for the `run` container instead'),
  SVC_K8S_KEYS_SECRET: text('kubernetes', NONE, 'a Secret with the runner\'s receipt key, mounted in `signer` only'),
  SVC_K8S_SOURCE: { ...text('kubernetes', '`k8s`', '`SVC_SOURCE` of the pods\' runs'), pattern: SOURCE },
  SVC_K8S_TTL_SECONDS: int('kubernetes', 3600, [0, 31_536_000], '`ttlSecondsAfterFinished`'),
  SVC_K8S_ACTIVE_DEADLINE_SECONDS: int('kubernetes', 21600, [0, 31_536_000], '`activeDeadlineSeconds`'),
  SVC_K8S_API_URL: text('kubernetes', 'from `KUBERNETES_SERVICE_HOST`/`_PORT`', 'API server URL'),
  SVC_K8S_SA_DIR: text('kubernetes', '`/var/run/secrets/kubernetes.io/serviceaccount`', 'service-account mount'),
  SVC_K8S_GATE_URL: { ...text('kubernetes', NONE, '`svc gate serve`\'s URL, the pods\' only route out; needs ' +
    '`SVC_GATE_SECRET_FILE` (the secret each pod\'s gate credential is minted with)'),
  pattern: [/^http:\/\/[A-Za-z0-9.-]+(:\d{1,5})?\/?$/, '`http://<service>[:port]`'] },
  KUBERNETES_SERVICE_HOST: text('kubernetes', NONE, 'set by Kubernetes in every pod: the API server'),
  KUBERNETES_SERVICE_PORT: text('kubernetes', '`443`', 'its port'),

  SVC_GATE_SECRET_FILE: secret('gate', 'required', 'the secret (≥ 32 bytes) every client\'s job credential is made ' +
    'with (else 407); the trigger mints pod credentials with the same file'),
  SVC_GATE_METRICS_TOKEN_FILE: secret('gate', NONE, 'a file holding the bearer token `GET /metrics` needs ' +
    '(≥ 16 characters, not the credential secret); unset: the gate serves no `/metrics`'),
  SVC_GATE_HOST: text('gate', '`127.0.0.1`', 'bind address', '--host'),
  SVC_GATE_PORT: int('gate', 3128, [0, 65535], 'port', '--port'),
  SVC_GATE_POLICY_FILE: text('gate', 'the model APIs only', '`{"allow", "deny", "repos": {…}}`', '--policy'),
  SVC_GATE_MAX_PER_JOB: int('gate', 32, [1, 256], 'connections of one job at once', '--per-job'),
  SVC_GATE_STATE_DIR: text('gate', 'in memory', 'a folder where `svc gate serve` keeps what each day and each ' +
    'budgeted run spent, so a restart does not let them spend their caps again'),
  SVC_PRICES_FILE: text('gate', 'the table in src/gate/prices.ts', 'a JSON price table laid over svc\'s ' +
    '(`{"date", "models": {"<model>": {"input", "output", "cache_read", "cache_write", "cache_write_1h"}}}`, ' +
    'US$ per million tokens)'),
  SVC_BUDGET_REPO_DAY_USD: { ...text('gate', 'no cap', 'metered US$ one repository\'s runs may spend per UTC day; ' +
    'at the cap the gate refuses model calls and the run asks to raise it'), pattern: USD },
  SVC_BUDGET_SERVER_DAY_USD: { ...text('gate', 'no cap', 'likewise, for all runs of this machine (or of one ' +
    '`svc gate serve`)'), pattern: USD },
  ANTHROPIC_BASE_URL: text('gate', NONE, 'model API base the gate forwards to (the model keys, `ANTHROPIC_API_KEY`, ' +
    '`OPENAI_API_KEY`, `GEMINI_API_KEY`, …, are listed in src/gate/model-apis.ts); for Anthropic the origin form ' +
    'claude takes, without `/v1` (svc appends `/v1` for opencode, so a base ending in `/v1` would reach `/v1/v1`)'),
  OPENAI_BASE_URL: text('gate', NONE, 'likewise'),
  GOOGLE_GEMINI_BASE_URL: text('gate', NONE, 'likewise'),

  SVC_ORIGIN: bySvc('the run\'s recorded origin: the trigger sets it per job, the Control Plane to `control`; a ' +
    'webhook origin confines `.md`/`.json` inputs to the repository and keeps the server\'s sandbox rule'),
  SVC_CONTROL_PROVIDERS: bySvc('the Control Plane\'s `providers` setting (JSON) in the `svc start` it runs: the ' +
    'run has them as the operator\'s, over `operator.json`\'s; read only with `SVC_ORIGIN=control`'),
  SVC_REPO_NAME: bySvc('the served repository a trigger job was routed to: the run\'s `repo`'),
  SVC_TRACEPARENT: bySvc('the W3C `traceparent` a run continues: its job\'s span (trigger) or the one ' +
    '`POST /v1/runs` was given (Control Plane); a malformed value starts a new trace'),
  SVC_JOB_ID: bySvc('the trigger job of a run: a `trackera:<id>` run reads that job\'s snapshot'),
  SVC_RUN_LEASE_UNTIL: bySvc('the time a Kubernetes pod\'s `seal` step stores as its run\'s lease (its Job\'s ' +
    'deadline plus 10 minutes), past which the Control Plane ends the run if it is still active'),
  SVC_SIGN_LATER: bySvc('`1` in a Kubernetes pod\'s `run` container: evidence instead of a receipt'),
  SVC_GATE_EVIDENCE_URL: bySvc('a Kubernetes pod\'s gate address for the run\'s connections'),
  SVC_SECRETS_HANDOFF: bySvc('the 0600 file under `~/.svc/handoff/` a re-executed svc reads its secrets from'),
  SVC_HANDOFF_FD: bySvc('`3`, the inherited pipe a child svc reads its secrets and the sandbox probe from'),
  SVC_RUN_KEY: { ...bySvc('the key of a run the Control Plane queued (its `run-key`), made with its row and handed ' +
    'to the run\'s launcher on fd 3, never in an environment; in a Kubernetes pod the key `svc pod seal` handed ' +
    'from the run\'s own, in a handoff file'), secret: true },
  SVC_LAUNCHER_PID: bySvc('the launcher a detached run worker watches'),
  SVC_TASK_FILE: bySvc('for providers: the task'),
  SVC_QUESTION_FILE: bySvc('for providers: where a question is written'),
  SVC_ANSWER_FILE: bySvc('for providers: where its answer appears'),
  SVC_RUN_ID: bySvc('for providers: the run'),
  SVC_PROCESS_TREE: bySvc('marks the processes of an unsandboxed agent or of a tool svc runs (git), to end them all'),
  SVC_GIT_PUSH_TOKEN: bySvc('the push\'s token, for svc\'s `GIT_ASKPASS` only'),
  SVC_GIT_CREDENTIAL_URL: bySvc('the URL that askpass answers for'),
  SVC_GIT_CREDENTIAL_USER_URL: bySvc('likewise, with the user name'),

  SVC_NODE: text('packaging', '`node`', 'the Node `bin/svc` runs'),
  SVC_HEALTH_URL: text('packaging', NONE, 'the container\'s health check'),
  SOURCE_DATE_EPOCH: text('packaging', '`0`', 'bundle file times'),
  SVC_TEST_CHROMIUM: text('packaging', NONE, 'browser path for tests'),
  SVC_PROVIDER_CLIS: text('packaging', NONE, 'where `npm run test:providers` installed the agent CLIs it tests'),
  SVC_TEST_HELD_MS: text('packaging', '`60000`', 'how long a test file may run on after its last test before it fails'),
  SVC_FUZZ_SEED: text('packaging', 'random', 'replays a fuzz suite\'s failure (the seed it printed)'),
  SVC_FUZZ_REQUESTS: text('packaging', NONE, 'requests per fuzz suite'),
} as const satisfies Record<string, Setting>;

export type SettingName = keyof typeof SETTINGS;
type NameOf<Shape> = { [N in SettingName]: (typeof SETTINGS)[N] extends Shape ? N : never }[SettingName];
type IntSettingName = NameOf<{ range: readonly [number, number] }>;

/** The route secrets, from the webhook sources' table: one record there is its whole definition. */
const ROUTE_SECRETS: Readonly<Record<string, Setting>> = Object.fromEntries(SOURCES.flatMap((s) => {
  const meaning = `\`/${s.name}\` secret${'service' in s ? `: ${s.service}` : ''}`;
  const names: string[] = [...s.secret, ...('secretFile' in s ? [s.secretFile] : [])];
  return names.map((name, i) => [name, { group: 'trigger', default: NONE, by: 'operator',
    meaning: i === 0 ? meaning : `or this, for the same (${names[0]} wins)`, secret: true }]);
}));

/** Every variable svc reads or sets, the route secrets included: what the README's tables list. */
export const ALL_SETTINGS: Readonly<Record<string, Setting>> = { ...SETTINGS, ...ROUTE_SECRETS };

/** The credentials svc reads: no agent or tool ever receives them through its environment. */
export const SECRET_NAMES: ReadonlySet<string> =
  new Set(Object.entries(ALL_SETTINGS).flatMap(([name, s]) => (s.secret ? [name] : [])));

/** The text of a file a setting names, read once at start: unreadable is an error naming the setting. */
export function settingFile(name: SettingName, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new BadSettingError(`${name} could not be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

/**
 * SVC_CONTROL_TOKEN, else the first line of SVC_CONTROL_TOKEN_FILE: the Control Plane's own token, or the one the
 * trigger server presents to it. An unreadable or empty file is an error, not a silently open server (or a 401 loop).
 */
export function controlTokenSetting(env: NodeJS.ProcessEnv): string | undefined {
  if (env.SVC_CONTROL_TOKEN) return env.SVC_CONTROL_TOKEN;
  const file = setting(env, 'SVC_CONTROL_TOKEN_FILE');
  if (!file) return undefined;
  const token = settingFile('SVC_CONTROL_TOKEN_FILE', file).split('\n', 1)[0]!.trim();
  if (!token) throw new BadSettingError('SVC_CONTROL_TOKEN_FILE is empty');
  return token;
}

/** The variable's value; unset and empty are the same (undefined). One that misses its pattern is refused. */
export function setting(env: NodeJS.ProcessEnv, name: SettingName): string | undefined {
  const value = env[name] || undefined;
  const rule = (SETTINGS[name] as Setting).pattern;
  if (value !== undefined && rule && !rule[0].test(value)) {
    throw new BadSettingError(`${name} must be ${rule[1]} (got "${shownValue(value)}")`);
  }
  return value;
}

/** The variable's value, else its default when the registry gives a literal one (`127.0.0.1`, not `~/…`). */
export function settingOr(env: NodeJS.ProcessEnv, name: SettingName): string {
  const fallback = /^`([^`~]*)`$/.exec(String(SETTINGS[name].default))?.[1];
  if (fallback === undefined) throw new TypeError(`${name} has no literal default`);
  return setting(env, name) ?? fallback;
}

/** `text` (a flag's or a variable's value, named `what`) as a whole number in [min, max]. */
function intIn(text: string, what: string, min: number, max: number): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max) {
    throw new BadSettingError(`${what} must be an integer from ${min} to ${max} (got "${shownValue(text)}")`);
  }
  return n;
}

/** An integer variable in its range, else its default; `bound` narrows both; the flag, when given, wins. */
export function settingInt(
  env: NodeJS.ProcessEnv, name: IntSettingName, bound: { max?: number; fallback?: number; flag?: string } = {},
): number {
  const s: Setting = SETTINGS[name];
  const [min, top] = s.range!;
  const max = Math.min(bound.max ?? top, top);
  if (bound.flag !== undefined) return intIn(bound.flag, s.flag ?? name, min, max);
  const text = setting(env, name);
  return text === undefined ? Math.min(bound.fallback ?? (s.default as number), max) : intIn(text, name, min, max);
}

/** A US-dollar variable (SVC_BUDGET_*) as a number, or null when unset. */
export function settingUsd(
  env: NodeJS.ProcessEnv, name: 'SVC_BUDGET_REPO_DAY_USD' | 'SVC_BUDGET_SERVER_DAY_USD',
): number | null {
  const text = setting(env, name);
  return text === undefined ? null : Number(text);
}

/** One of a choice variable's values (its first when unset); anything else is a BadSettingError naming it. */
export function settingChoice(env: NodeJS.ProcessEnv, name: NameOf<{ choices: readonly string[] }>): string {
  const choices: readonly string[] = SETTINGS[name].choices;
  const value = setting(env, name) ?? choices[0]!;
  if (!choices.includes(value)) {
    const one = choices.map((c) => `"${c}"`).join(' or ');
    throw new BadSettingError(`${name} must be ${one} (got "${shownValue(value)}")`);
  }
  return value;
}
