// The one place that decides a child's environment (DESIGN §7a; docs/engine.md "The agent's environment"). svc's own
// tools get a denylist (svc's names and every SVC_*); every other kind an allowlist: an agent the same one whoever
// started its run, plus what its call site adds by name.
import { SECRET_NAMES } from '../settings-registry.ts';

/** The credentials a run's own svc uses (push, issue fetchers): handed to it through a pipe, never its environment. */
export const RUN_SECRET_NAMES = ['GITHUB_TOKEN', 'GH_TOKEN', 'ERRTRACK_AUTH_TOKEN', 'TRACKERA_API_KEY'] as const;

/** A run's worker also ships to the Control Plane with its token. */
export const WORKER_SECRET_NAMES = [...RUN_SECRET_NAMES, 'SVC_CONTROL_TOKEN', 'OTEL_EXPORTER_OTLP_HEADERS'] as const;

/** SVC_* variables an untrusted child may still see (they carry no credential). */
const SVC_NAMES_PASSED: ReadonlySet<string> = new Set(['SVC_SOURCE']);

/** What an agent inherits of svc's environment (docs/engine.md lists why). Not TMPDIR: /tmp is its own. */
const AGENT_NAMES: ReadonlySet<string> = new Set([
  'PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LANGUAGE', 'TERM', 'COLORTERM', 'TZ',
  'SSL_CERT_FILE', 'SSL_CERT_DIR', 'NODE_EXTRA_CA_CERTS', 'CURL_CA_BUNDLE', 'REQUESTS_CA_BUNDLE', 'GIT_SSL_CAINFO',
  'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'all_proxy', 'no_proxy',
  'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL', 'ANTHROPIC_MODEL', 'ANTHROPIC_SMALL_FAST_MODEL', 'OPENAI_API_KEY',
  'OPENAI_BASE_URL', 'GEMINI_API_KEY', 'GOOGLE_API_KEY', 'GOOGLE_GEMINI_BASE_URL', 'OPENROUTER_API_KEY', 'GROQ_API_KEY',
  'MISTRAL_API_KEY', 'DEEPSEEK_API_KEY', 'XAI_API_KEY', 'DISABLE_TELEMETRY', 'DISABLE_AUTOUPDATER',
  'DISABLE_ERROR_REPORTING',
]);

/** Prefixes of the providers' own settings (claude, codex, gemini, aider, opencode) and of the locale. */
const AGENT_PREFIXES = ['LC_', 'CLAUDE_CODE_', 'CODEX_', 'GEMINI_', 'AIDER_', 'OPENCODE_'];

/** Whether an agent (a provider or a check) inherits `name` from svc's environment. */
function isAgentName(name: string): boolean {
  if (isSecretName(name)) return false;
  if (name.startsWith('SVC_')) return SVC_NAMES_PASSED.has(name);
  return AGENT_NAMES.has(name) || AGENT_PREFIXES.some((p) => name.startsWith(p));
}

/** What a child is, which decides what it may inherit. */
export type ChildKind =
  | 'agent' // a provider or a check: untrusted, sandboxed; an allowlist (isAgentName)
  | 'tool' // git, gh, a browser opener started by svc itself for its own work
  | 'svc-worker' // the detached run worker and the background Control Plane: today they inherit svc's whole env
  | 'launcher' // `svc start` from the trigger server (and a Kubernetes job pod's env): a short allowlist
  | 'control-launcher' // `svc start` from the Control Plane: locale, paths, provider logins, engine credentials
  | 'fetch' // curl fetching from an outside API: paths, proxies and CA settings only
  | 'probe'; // `<cli> --version`, `git log` for a culprit: PATH and HOME only

/** True when `name` (a credential svc reads, or its _FILE) must never reach an agent's or a tool's environment. */
export function isSecretName(name: string): boolean {
  return SECRET_NAMES.has(name) || name.endsWith('_FILE') && SECRET_NAMES.has(name.slice(0, -5));
}

// SVC_CONTROL_ANSWER_DIR is a folder, not a secret: a run waits there for the answer the Control Plane writes.
// GITHUB_API_URL is where the PR goes and which host the push token belongs to (GitHub Enterprise): without it a run
// started by the trigger would take github.com for the token's host and refuse an Enterprise push.
// SVC_SERVER_SANDBOX is the server's own setting (DESIGN §7a): the only way a server-started run goes unsandboxed.
// SVC_REPO_NAME is the served repository a job was routed to (the run's `repo`), set by the launcher per job.
// SVC_PUBLIC_URL is the Control Plane's public address, the run page linked from its PR body.
// The OpenTelemetry names (no credential: the headers go by the secrets pipe) let a run's worker export its spans.
const OTEL_NAMES = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_SERVICE_NAME',
  'OTEL_TRACES_EXPORTER'];
const LAUNCHER_NAMES = new Set(['PATH', 'HOME', 'USER', 'LANG', 'TZ', 'TERM', 'TMPDIR', 'SVC_SOURCE', 'SVC_CONTROL_URL',
  'SVC_CONTROL_ANSWER_DIR', 'SVC_ORIGIN', 'SVC_JOB_ID', 'GITHUB_API_URL', 'SVC_SERVER_SANDBOX', 'SVC_REPO_NAME',
  'SVC_PUBLIC_URL', 'SVC_TRACEPARENT', ...OTEL_NAMES]);

// What a run launched by the Control Plane may inherit: the credentials the engine itself uses are among them (it
// strips them again before a provider runs). Webhook secrets and SVC_API_TOKEN are never passed.
const CONTROL_LAUNCHER_NAMES = new Set([
  'PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'TZ', 'TERM', 'TMPDIR', 'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY',
  'http_proxy', 'https_proxy', 'no_proxy', 'SSL_CERT_FILE', 'NODE_EXTRA_CA_CERTS', 'ANTHROPIC_API_KEY',
  'ANTHROPIC_BASE_URL', 'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'GEMINI_API_KEY', 'GOOGLE_API_KEY', 'OPENROUTER_API_KEY',
  'ERRTRACK_AUTH_TOKEN', 'ERRTRACK_URL', 'GITHUB_TOKEN', 'GH_TOKEN', 'GITHUB_API_URL', 'TRACKERA_API_KEY',
  'TRACKERA_API_URL', 'SVC_CONTROL_TOKEN_FILE', 'GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_COMMITTER_NAME',
  'GIT_COMMITTER_EMAIL', 'GIT_SSH_COMMAND', 'SVC_SERVER_SANDBOX', 'SVC_PUBLIC_URL', ...OTEL_NAMES,
]);

const FETCH_NAMES = new Set(['PATH', 'HOME', 'https_proxy', 'HTTPS_PROXY', 'http_proxy', 'HTTP_PROXY', 'no_proxy',
  'NO_PROXY', 'SSL_CERT_FILE', 'CURL_CA_BUNDLE']);

const PROBE_NAMES = new Set(['PATH', 'HOME']);

/** Whether the trigger server's `svc start` child (and a job pod) may inherit `name`. */
export function isLauncherName(name: string): boolean {
  return LAUNCHER_NAMES.has(name) || name.startsWith('LC_');
}

/** Names an old-Node launcher's pid (start.ts runLaunched): for the launched svc only, never its children. */
export const LAUNCHER_PID_VAR = 'SVC_LAUNCHER_PID';

/** Whether `name` of `base` passes to a child of `kind` (before `extra` is added). */
function passes(kind: ChildKind, name: string): boolean {
  if (name === LAUNCHER_PID_VAR) return false;
  switch (kind) {
    case 'agent':
      return isAgentName(name);
    case 'tool':
      return !isSecretName(name) && (!name.startsWith('SVC_') || SVC_NAMES_PASSED.has(name));
    case 'svc-worker':
      return true;
    case 'launcher':
      return isLauncherName(name);
    case 'control-launcher':
      return CONTROL_LAUNCHER_NAMES.has(name) || name.startsWith('LC_') || name.startsWith('XDG_');
    case 'fetch':
      return FETCH_NAMES.has(name);
    case 'probe':
      return PROBE_NAMES.has(name);
  }
}

/**
 * The environment for a child of `kind`: the names of `base` its rule lets through, plus `extra` (which the call
 * site chose by name, e.g. SVC_TASK_FILE for a provider, GIT_INDEX_FILE for one git call).
 * Secrets a child svc needs travel through a pipe or a 0600 file, never through this function.
 */
export function childEnv(
  kind: ChildKind, base: NodeJS.ProcessEnv, extra: Record<string, string> = {},
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(base)) {
    if (value !== undefined && passes(kind, key)) env[key] = value;
  }
  for (const [key, value] of Object.entries(extra)) env[key] = value;
  return env;
}
