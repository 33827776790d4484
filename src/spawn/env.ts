// The one place that decides a child's environment (DESIGN §7a; docs/engine.md "The agent's environment"). svc's own
// tools get a denylist (svc's names and every SVC_*); every other kind an allowlist: an agent the same one whoever
// started its run, plus what its call site adds by name.
import { SECRET_NAMES } from '../settings-registry.ts';

/** The credentials a run's own svc uses (push, issue fetchers, shipping to the Control Plane, trace export): handed
 * to it through a pipe, never its environment. */
export const WORKER_SECRET_NAMES = [
  'GITHUB_TOKEN', 'GH_TOKEN', 'ERRTRACK_AUTH_TOKEN', 'TRACKERA_API_KEY', 'SVC_CONTROL_TOKEN',
  'OTEL_EXPORTER_OTLP_HEADERS',
] as const;

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

/** The model providers' keys among those: what an agent's CLI calls its model with. */
export const PROVIDER_KEY_NAMES: readonly string[] = [...AGENT_NAMES].filter((name) => name.endsWith('_API_KEY'));

/** Prefixes of the providers' own settings (claude, codex, gemini, aider, opencode) and of the locale. */
const AGENT_PREFIXES = ['LC_', 'CLAUDE_CODE_', 'CODEX_', 'GEMINI_', 'AIDER_', 'OPENCODE_'];

/** True when `name` (a credential svc reads, or its _FILE) must never reach an agent's or a tool's environment. */
export function isSecretName(name: string): boolean {
  return SECRET_NAMES.has(name) || name.endsWith('_FILE') && SECRET_NAMES.has(name.slice(0, -5));
}

// Among a launcher's names: GITHUB_API_URL says which host the push token belongs to (GitHub Enterprise);
// SVC_SERVER_SANDBOX is the server's own setting, the only way a server-started run goes unsandboxed (DESIGN §7a);
// the OpenTelemetry names carry no credential (the headers go by the secrets pipe); SVC_COMPILE_CACHE=0 set on a
// server turns the compile cache off for its runs' svc too.
const OTEL_NAMES = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_SERVICE_NAME',
  'OTEL_TRACES_EXPORTER'];
const LAUNCHER_NAMES = new Set(['PATH', 'HOME', 'USER', 'LANG', 'TZ', 'TERM', 'TMPDIR', 'SVC_SOURCE', 'SVC_CONTROL_URL',
  'SVC_CONTROL_ANSWER_DIR', 'SVC_ORIGIN', 'SVC_JOB_ID', 'GITHUB_API_URL', 'SVC_SERVER_SANDBOX', 'SVC_REPO_NAME',
  'SVC_PUBLIC_URL', 'SVC_TRACEPARENT', 'SVC_COMPILE_CACHE', ...OTEL_NAMES]);

// The engine's own credentials (push, issue fetchers) reach it by the secrets pipe, never by these names.
const CONTROL_LAUNCHER_NAMES = new Set([
  'PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'TZ', 'TERM', 'TMPDIR', 'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY',
  'http_proxy', 'https_proxy', 'no_proxy', 'SSL_CERT_FILE', 'NODE_EXTRA_CA_CERTS', 'ANTHROPIC_API_KEY',
  'ANTHROPIC_BASE_URL', 'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'GEMINI_API_KEY', 'GOOGLE_API_KEY', 'OPENROUTER_API_KEY',
  'ERRTRACK_URL', 'GITHUB_API_URL', 'TRACKERA_API_URL', 'SVC_CONTROL_TOKEN_FILE', 'GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL',
  'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL', 'GIT_SSH_COMMAND', 'SVC_SERVER_SANDBOX', 'SVC_PUBLIC_URL',
  'SVC_COMPILE_CACHE', ...OTEL_NAMES,
]);

const FETCH_NAMES = new Set(['PATH', 'HOME', 'https_proxy', 'HTTPS_PROXY', 'http_proxy', 'HTTP_PROXY', 'no_proxy',
  'NO_PROXY', 'SSL_CERT_FILE', 'CURL_CA_BUNDLE']);

/** Whether the trigger server's `svc start` child (and a job pod) may inherit `name`. */
export function isLauncherName(name: string): boolean {
  return LAUNCHER_NAMES.has(name) || name.startsWith('LC_');
}

/** What a child is decides which names of svc's environment it inherits. */
const KINDS = {
  /** A provider or a check: untrusted, sandboxed. */
  agent: (name: string) => !isSecretName(name) && (name.startsWith('SVC_')
    ? SVC_NAMES_PASSED.has(name)
    : AGENT_NAMES.has(name) || AGENT_PREFIXES.some((p) => name.startsWith(p))),
  /** git, gh, a browser opener started by svc itself for its own work. */
  tool: (name: string) => !isSecretName(name) && (!name.startsWith('SVC_') || SVC_NAMES_PASSED.has(name)),
  /** The detached run worker and the background Control Plane inherit svc's whole environment. */
  'svc-worker': () => true,
  /** `svc start` from the trigger server (and a Kubernetes job pod's environment). */
  launcher: isLauncherName,
  /** `svc start` from the Control Plane: locale, paths, provider logins, engine credentials. */
  'control-launcher': (name: string) =>
    CONTROL_LAUNCHER_NAMES.has(name) || name.startsWith('LC_') || name.startsWith('XDG_'),
  /** curl fetching from an outside API: paths, proxies and CA settings only. */
  fetch: (name: string) => FETCH_NAMES.has(name),
  /** `<cli> --version`, `git log` for a culprit. */
  probe: (name: string) => name === 'PATH' || name === 'HOME',
};

export type ChildKind = keyof typeof KINDS;

/** Names an old-Node launcher's pid (start.ts runLaunched): for the launched svc only, never its children. */
export const LAUNCHER_PID_VAR = 'SVC_LAUNCHER_PID';

// NODE_COMPILE_CACHE turns Node's cache on before svc's first line, past src/cli/compile-cache.ts's rules and
// SVC_COMPILE_CACHE=0: it stays with the process it was given to, and no child of svc, svc or other, inherits it.
const NEVER_PASSED: ReadonlySet<string> = new Set([LAUNCHER_PID_VAR, 'NODE_COMPILE_CACHE']);

/**
 * The environment for a child of `kind`: the names of `base` its rule lets through, plus `extra`, which the call
 * site chose by name (SVC_TASK_FILE for a provider, GIT_INDEX_FILE for one git call). Secrets a child svc needs
 * travel through a pipe or a 0600 file, never through here.
 */
export function childEnv(
  kind: ChildKind, base: NodeJS.ProcessEnv, extra: Record<string, string> = {},
): NodeJS.ProcessEnv {
  const passes = KINDS[kind];
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(base)) {
    if (value !== undefined && !NEVER_PASSED.has(key) && passes(key)) env[key] = value;
  }
  return Object.assign(env, extra);
}
