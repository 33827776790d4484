// The one way svc starts git: the argv prefix and the environment every git of svc's own gets, on the host or in its
// git sandbox. git reads no global or system configuration (~/.gitconfig, ~/.config/git/*, /etc/gitconfig: an agent
// that could write one must not get a program run on the host or a credential sent elsewhere), no attributes or
// ignore file outside the repository, and only the settings svc passes itself. Of the repository's own config (an
// agent may have written it), hooks, fsmonitor, helpers and signing programs are switched off here; the filters of a
// checkout on the host are switched off by name (filterOverrides, used by createWorktree in git.ts).
// Must not: let the operator's GIT_* environment re-enable what this turns off (GIT_CONFIG_*, GIT_DIR, GIT_ASKPASS...).

/**
 * Settings that hold whatever the global, system or repository config says:
 * - no hook, fsmonitor, submodule program, signing program or automatic gc runs (core.hooksPath=/dev/null holds none);
 * - no attributes or ignore file but the repository's (their defaults live under ~/.config/git);
 * - no credential helper (svc's token reaches git only through its own askpass, src/engine/git-token.ts);
 * - no redirect is followed (a credential would follow it to the other host), no `ext::` transport.
 * The `-c` values reach every git this one starts, through GIT_CONFIG_PARAMETERS.
 */
export const SAFE_GIT_CONFIG = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false',
  '-c', 'submodule.recurse=false', '-c', 'diff.ignoreSubmodules=all', '-c', 'status.submoduleSummary=false',
  '-c', 'push.recurseSubmodules=no', '-c', 'fetch.recurseSubmodules=false', '-c', 'core.untrackedCache=false',
  '-c', 'core.attributesFile=/dev/null', '-c', 'core.excludesFile=/dev/null', '-c', 'credential.helper=',
  '-c', 'http.followRedirects=false', '-c', 'protocol.ext.allow=never', '-c', 'commit.gpgSign=false',
  '-c', 'tag.gpgSign=false', '-c', 'log.showSignature=false', '-c', 'gc.auto=0', '-c', 'maintenance.auto=false',
] as const;

/** No global or system config or attributes, and never a terminal prompt (svc runs unattended). */
export const GIT_ISOLATION_ENV: Readonly<Record<string, string>> = {
  GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_ATTR_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0',
};

// The operator's git settings that only say who commits or how to reach a server; every other GIT_* name (config
// injection, another repository or object folder, an askpass, a proxy command, a pager) stays out.
const GIT_NAMES_PASSED = new Set(['GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL',
  'GIT_SSH_COMMAND', 'GIT_SSH', 'GIT_SSL_CAINFO', 'GIT_SSL_CAPATH', 'GIT_HTTP_LOW_SPEED_LIMIT',
  'GIT_HTTP_LOW_SPEED_TIME']);

/** `env` without the GIT_* names svc does not pass on (the base for every git child's environment). */
export function gitBaseEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('GIT_') || GIT_NAMES_PASSED.has(name)) out[name] = value;
  }
  return out;
}

/** The argv of one git svc runs: the hardening first, then `args`. */
export function gitArgv(args: readonly string[]): string[] {
  return ['git', ...SAFE_GIT_CONFIG, ...args];
}

/** The extra environment of one git svc runs: isolation, then what the call site chose (`extra` cannot undo it). */
export function gitExtraEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { ...extra, ...GIT_ISOLATION_ENV };
}

/**
 * Switches off every filter driver that `configEntries` (the output of `git config -z --get-regexp '^filter\.'` in the
 * repository) defines: a checkout on the host runs no smudge, clean or process program the repository's config names.
 * Through GIT_CONFIG_COUNT, whose keys may hold any character (a `-c` key cannot hold '=').
 */
export function filterOverrides(configEntries: string): Record<string, string> {
  const drivers = new Set<string>();
  for (const entry of configEntries.split('\0')) {
    const key = entry.split('\n', 1)[0] ?? '';
    const m = /^filter\.(.+)\.[^.]+$/s.exec(key);
    if (m) drivers.add(m[1]!);
  }
  const env: Record<string, string> = {};
  let n = 0;
  for (const name of drivers) {
    for (const [setting, value] of [['clean', ''], ['smudge', ''], ['process', ''], ['required', 'false']]) {
      env[`GIT_CONFIG_KEY_${n}`] = `filter.${name}.${setting}`;
      env[`GIT_CONFIG_VALUE_${n}`] = value!;
      n += 1;
    }
  }
  if (n) env.GIT_CONFIG_COUNT = String(n);
  return env;
}
