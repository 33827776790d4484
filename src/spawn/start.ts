// Starts children, and the one place that decides a child's environment (DESIGN §7a; docs/engine.md "The agent's
// environment"): the only file in src/ that imports node:child_process (test/unit/spawn-imports.test.ts). Every start
// names the child's kind, whose rule below builds its environment; argv is an array, never parsed by a shell (an
// agent's reaches the /bin/sh that starts it as that shell's arguments: spawn-group.ts). svc's own tools get a
// denylist (svc's names and every SVC_*); every other kind an allowlist: an agent the same one whoever started its
// run, plus what its call site adds by name.
import { execFile, execFileSync, spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import type { Writable } from 'node:stream';
import { SECRET_NAMES } from '../settings-registry.ts';
import { svcCliPath } from './svc-paths.ts';
import { createTreeGuard } from './tree.ts';

export type { ChildProcess };

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

/** A credential among the names those prefixes pass: a key, token, secret, password or passphrase (aider's key list,
 * claude's OAuth token and client key passphrase), or opencode's inline config, which may embed keys. The prefix
 * passes none of them; the run adds them by name (worker.ts): as they are without a gate; with one, only as the
 * placeholder of a key the gate holds. */
export function isCliCredential(name: string): boolean {
  return AGENT_PREFIXES.some((p) => name.startsWith(p)) && SHELL_NAME.test(name) && !isSecretName(name) &&
    isCredentialName(name);
}

/** A name whose value is a credential by its shape, whoever reads it: the suffixes and the config above. */
export function isCredentialName(name: string): boolean {
  return /(KEY|TOKEN|SECRET|PASSWORD|PASSPHRASE|CREDENTIALS?)$/.test(name) || name === 'OPENCODE_CONFIG_CONTENT';
}

/** svc's values of the isCliCredential names in `env`. */
export function cliCredentials(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] =>
    e[1] !== undefined && isCliCredential(e[0])));
}

/** True when `name` (a credential svc reads, or its _FILE) must never reach an agent's or a tool's environment. */
export function isSecretName(name: string): boolean {
  return SECRET_NAMES.has(name) || name.endsWith('_FILE') && SECRET_NAMES.has(name.slice(0, -5));
}

/** Whether the operator may pass `name` to agents (a plan's `passed_env`): never svc's secrets nor SVC_*. */
export function isPassableName(name: string): boolean {
  return !isSecretName(name) && !name.startsWith('SVC_');
}

/** The values in `env` of the names the operator passes (isPassableName). */
export function passedValues(names: readonly string[], env: NodeJS.ProcessEnv): Record<string, string> {
  const values: Record<string, string> = {};
  for (const name of names) {
    const value = env[name];
    if (value !== undefined && isPassableName(name)) values[name] = value;
  }
  return values;
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

/** A name a shell keeps: the /bin/sh that starts an agent (spawn-group.ts) drops others (a-b, X.Y) where it is dash. */
const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** What a child is decides which names of svc's environment it inherits. */
const KINDS = {
  /** A provider or a check: untrusted, sandboxed. */
  agent: (name: string) => !isSecretName(name) && SHELL_NAME.test(name) && (name.startsWith('SVC_')
    ? SVC_NAMES_PASSED.has(name)
    : AGENT_NAMES.has(name) || AGENT_PREFIXES.some((p) => name.startsWith(p)) && !isCliCredential(name)),
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

/** Names an old-Node launcher's pid (runLaunched): for the launched svc only, never its children. */
const LAUNCHER_PID_VAR = 'SVC_LAUNCHER_PID';

// NODE_COMPILE_CACHE turns Node's cache on before svc's first line, past src/cli/node-setup.ts's rules and
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

/** Who the child is and what it inherits: `base` filtered by the kind's rule, plus `extra` by name. */
export interface ChildSpec {
  kind: ChildKind;
  base: NodeJS.ProcessEnv;
  extra?: Record<string, string>;
  cwd?: string;
}

function prepare(argv: readonly string[], spec: ChildSpec) {
  const [bin, ...args] = argv;
  if (bin === undefined) throw new RangeError('a child needs a program to run');
  const options = { cwd: spec.cwd, env: childEnv(spec.kind, spec.base, spec.extra), shell: false, windowsHide: true };
  return { bin, args, options };
}

/** Tells a child svc to read its handed secrets from the pipe on its fd HANDOFF_FD, right after stdio. */
export const HANDOFF_FD_VAR = 'SVC_HANDOFF_FD';
export const HANDOFF_FD = 3;
/** Names the handoff file of a re-executed process (a path, not a secret; cli/node-setup.ts writes and takes it). */
export const HANDOFF_VAR = 'SVC_SECRETS_HANDOFF';

/** `env` without any of svc's secret values and without a stale handoff path or descriptor: a child svc's base. */
export function withoutSecrets(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    const secretValue = SECRET_NAMES.has(name) && !name.endsWith('_FILE');
    if (value === undefined || name === HANDOFF_VAR || name === HANDOFF_FD_VAR || secretValue) continue;
    out[name] = value;
  }
  return out;
}

export interface StartOptions extends ChildSpec {
  stdio?: StdioOptions;
  /** Its own process group: a group signal then reaches it and what it started. */
  detached?: boolean;
  /**
   * svc's secrets for a child svc, written to a pipe on its fd 3, never into its environment, which
   * /proc/<pid>/environ shows to the same user (DESIGN §7a; the child reads them with cli/node-setup.ts). A promise
   * (any thenable) holds the child at its read until it settles (a launch started before its checkout is confirmed);
   * null sends nothing, and a child svc that reads an empty pipe refuses to go on.
   */
  secrets?: Readonly<Record<string, string>> | PromiseLike<Readonly<Record<string, string>> | null>;
}

/** The kinds that are a child svc (KINDS): the only children handed secrets. */
const TAKES_SECRETS: ReadonlySet<ChildKind> = new Set(['svc-worker', 'launcher', 'control-launcher']);

/** A long-lived or streaming child. */
export function startChild(argv: readonly string[], opts: StartOptions): ChildProcess {
  const { secrets } = opts;
  // Only a child svc reads and closes its fd 3 at start; any other program would keep the secrets it was handed.
  if (secrets !== undefined && !TAKES_SECRETS.has(opts.kind)) {
    throw new RangeError(`secrets go only to a child svc, never to a child of kind ${opts.kind}`);
  }
  // Any thenable is held, not only a native Promise (else it would go as `{}`); its `then` is read once, here, so a
  // getter that throws refuses the spawn before anything starts.
  const then: unknown = secrets === undefined ? undefined : Reflect.get(secrets, 'then');
  const extra = secrets === undefined ? opts.extra : { ...opts.extra, [HANDOFF_FD_VAR]: `${HANDOFF_FD}` };
  const { bin, args, options } = prepare(argv, { ...opts, extra });
  const detached = opts.detached ?? false;
  if (secrets === undefined) return spawn(bin, args, { ...options, detached, stdio: opts.stdio ?? 'pipe' });
  const given: StdioOptions = Array.isArray(opts.stdio) ? opts.stdio : ['ignore', 'pipe', 'pipe'];
  const child = spawn(bin, args, { ...options, detached, stdio: [...given.slice(0, HANDOFF_FD), 'pipe'] });
  const pipe = child.stdio[HANDOFF_FD] as Writable | null | undefined;
  // A child already gone never reads it; once written the data waits in the socket, and this process need not.
  pipe?.on('error', () => {});
  const send = (handed: Readonly<Record<string, string>> | null) => {
    if (handed === null) pipe?.destroy();
    else pipe?.end(JSON.stringify({ secrets: secretsIn(handed) }), () => pipe.destroy());
  };
  // Known secrets are written to the pipe before this returns, so before the caller records the child (a worker's pid
  // in its state): a parent killed right after that record still leaves its child the go-ahead, and the run goes on.
  // This end closes later, once flushed, or with this process.
  if (typeof then !== 'function') send(secrets as Readonly<Record<string, string>>);
  else {
    type Handed = Readonly<Record<string, string>> | null;
    void new Promise<Handed>((ok, no) => Reflect.apply(then, secrets, [ok, no])).then(send, () => pipe?.destroy());
  }
  return child;
}

/** svc's secrets (all, or those of `names`) with non-empty string values in `from` (`*_FILE` names hold paths). */
export function secretsIn(
  from: Readonly<Record<string, unknown>>, names: Iterable<string> = SECRET_NAMES,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = from[name];
    if (SECRET_NAMES.has(name) && !name.endsWith('_FILE') && typeof value === 'string' && value) out[name] = value;
  }
  return out;
}

/** Runs to completion and returns stdout; throws like execFileSync (the error carries `status` and `stderr`). */
export function runSync(argv: readonly string[], opts: ChildSpec & {
  maxBuffer?: number;
  timeout?: number;
  /** 'pipe' keeps it for the thrown error (`err.stderr`). */
  stderr?: 'pipe' | 'ignore';
  /** Descriptors the child gets from its fd 3 on (a sandbox's, bwrap-argv.ts openSandboxFds). */
  fds?: Array<number | 'ignore'>;
}): string {
  const { bin, args, options } = prepare(argv, opts);
  const tree = createTreeGuard();
  try {
    return execFileSync(bin, args, {
      ...marked(options, tree), encoding: 'utf8', maxBuffer: opts.maxBuffer ?? 1024 * 1024, timeout: opts.timeout,
      stdio: ['ignore', 'pipe', opts.stderr ?? 'pipe', ...opts.fds ?? []],
    });
  } catch (err) {
    // At its time limit the child got SIGTERM and lost its pipes; what it started (git's remote helper, holding its
    // connection to the origin) ran on, reparented: the marker finds it.
    if ((err as NodeJS.ErrnoException).code === 'ETIMEDOUT') tree.killAll();
    throw err;
  }
}

/** `options` with the guard's marker in the child's environment, which finds what the child started once reparented. */
function marked<T extends { env: NodeJS.ProcessEnv }>(options: T, tree: { marker: string }): T {
  return { ...options, env: { ...options.env, ...Object.fromEntries([tree.marker.split('=')]) } };
}

/**
 * How long a child ended by its time limit or an abort has, after SIGTERM, to clean up (git removes its *.lock files)
 * before what is left of its tree gets SIGKILL.
 */
const END_GRACE_MS = 2_000;

/**
 * Runs to completion without throwing, keeping at most `maxBuffer` of the output; `input` is written to stdin. Its time
 * limit or an abort of `signal` ends the child and every process it started: a kill of git alone left its remote
 * helper (git-remote-https, which holds the connection and the output pipes) orphaned, waiting on the remote for as
 * long as the remote liked, and this call waiting with it.
 */
export function runCollect(
  argv: readonly string[],
  opts: ChildSpec & { timeout?: number; maxBuffer?: number; input?: string; signal?: AbortSignal },
): Promise<{ status: number | null; stdout: string; stderr: string; error: Error | null }> {
  const { bin, args, options } = prepare(argv, opts);
  const { signal, timeout } = opts;
  return new Promise((resolve) => {
    const tree = createTreeGuard();
    let grace: NodeJS.Timeout | undefined;
    const child = execFile(bin, args, { ...marked(options, tree), maxBuffer: opts.maxBuffer ?? 64 * 1024 },
      (err, stdout, stderr) => {
        clearTimeout(timer);
        clearTimeout(grace);
        signal?.removeEventListener('abort', end);
        const code = (err as { code?: unknown } | null)?.code;
        const status = err ? (typeof code === 'number' ? code : null) : 0;
        resolve({ status, stdout: `${stdout}`, stderr: `${stderr}`, error: err });
      });
    // What is left once the child is gone or its grace is over: killed, and the output pipes let go, which a process
    // that left the tree unmarked (`env -i`) could otherwise hold open for as long as it liked, this call waiting.
    const finish = (): void => {
      clearTimeout(grace);
      tree.killAll();
      child.stdout?.destroy();
      child.stderr?.destroy();
    };
    // SIGTERM first, the tree recorded before: git removes its lock files on it (after a SIGKILL, an index.lock or a
    // ref's lock left behind fails every later git there), and what it started is still found once reparented.
    const end = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', end);
      tree.sample();
      if (child.exitCode !== null || child.signalCode !== null || !child.kill('SIGTERM')) {
        finish();
        return;
      }
      child.once('exit', finish);
      grace = setTimeout(finish, END_GRACE_MS);
    };
    const timer = timeout ? setTimeout(end, timeout) : undefined;
    if (child.pid !== undefined) tree.watch(child.pid);
    signal?.addEventListener('abort', end, { once: true });
    if (signal?.aborted) end();
    // A child that exits without reading it (or never started) must not end this process with EPIPE.
    if (opts.input !== undefined) child.stdin?.on('error', () => {}).end(opts.input);
  });
}

/** The signals a launcher hands on: every one a person or a service manager sends to stop or steer a process. */
const FORWARDED: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'];

/**
 * Runs `argv` as this process's stand-in (the old-Node launcher): the child gets this terminal's stdio, every signal
 * sent here exactly once (its own process group, so a terminal's Ctrl-C is not delivered twice), and this pid
 * (watchLifeline). Resolves with the child's exit code, or the signal that ended it.
 */
export function runLaunched(argv: readonly string[], opts: ChildSpec): Promise<number | NodeJS.Signals> {
  const extra = { ...opts.extra, [LAUNCHER_PID_VAR]: String(process.pid) };
  const child = startChild(argv, { ...opts, extra, stdio: 'inherit', detached: true });
  const handlers = FORWARDED.map((signal) => [signal, () => child.kill(signal)] as const);
  for (const [signal, handler] of handlers) process.on(signal, handler);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      for (const [name, handler] of handlers) process.off(name, handler);
      resolve(signal ?? code ?? 1);
    });
  });
}

/** Ends this process with `result` as its own: the exit code, or the same signal (so a shell sees what happened). */
export function exitLike(result: number | NodeJS.Signals): never {
  if (typeof result === 'number') process.exit(result);
  process.kill(process.pid, result);
  // Still here: the signal is ignored or handled, so the shell's convention for "ended by a signal".
  process.exit(128 + (osConstants.signals[result] ?? 0));
}

/**
 * The launched side never outlives its launcher, however that ended (SIGKILL included): once this process's parent
 * is no longer the launcher's pid, it stops as if sent SIGTERM. A pipe would not survive the servers' re-exec.
 */
export function watchLifeline(env: NodeJS.ProcessEnv): void {
  const launcher = Number(env[LAUNCHER_PID_VAR]);
  if (!Number.isInteger(launcher) || launcher <= 1) return;
  const check = (): void => {
    if (process.ppid !== launcher) {
      clearInterval(timer);
      process.kill(process.pid, 'SIGTERM');
    }
  };
  const timer = setInterval(check, 500);
  timer.unref();
  check();
}

/** How long a launcher (`svc start --detach`) may take to make its run and start the worker. */
export const LAUNCH_TIMEOUT_MS = 120_000;

// The argv of every `svc start` the Control Plane starts (start, resume and retry) and of a run's `svc worker`; each
// trigger source's is beside its handler. Text from outside always follows "--" or `--brief`, never read as an option.

/** `POST /v1/start`: `input` is a brief (with `brief: true`) or anything `svc start` classifies. */
export function controlStartArgs(
  s: {
    repo: string; run: string; pr: boolean; provider: string | null; brief: boolean; input: string;
  },
): string[] {
  const args = ['start', '--detach', '--repo', s.repo, '--run-id', s.run];
  if (s.pr) args.push('--pr');
  if (s.provider) args.push('--provider', s.provider);
  if (s.brief) args.push('--brief');
  args.push('--', s.input);
  return args;
}

export function resumeArgs(run: string, repo: string): string[] {
  return ['start', '--detach', '--resume', run, '--repo', repo];
}

export function retryArgs(from: string, run: string, repo: string): string[] {
  return ['start', '--detach', '--retry', from, '--run-id', run, '--repo', repo];
}

/** The run's detached worker: `node <cli> worker MODE --run-id RUN --repo REPO` (proc-group.ts checks it). */
export function workerArgv(mode: string, run: string, repo: string): string[] {
  return [process.execPath, svcCliPath(), 'worker', mode, '--run-id', run, '--repo', repo];
}
