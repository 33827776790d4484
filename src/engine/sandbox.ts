// The worker's side of the agent sandbox (DESIGN §7a): protocol files, the bwrap plans of the provider and the checks.
import { hash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { RunContext } from './run-context.ts';
import type { RunLimits } from './policy.ts';
import { makePlainDirsIn, openRunDir, replaceNoFollowIn, withDir } from './safe-fs.ts';
import { homeOf, svcHomeOf } from '../spawn/svc-paths.ts';
import { tryGit } from './git.ts';
import { agentSandboxPlan } from '../spawn/agent-plan.ts';
import { within, type SandboxPlan } from '../spawn/bwrap-argv.ts';
import { linkTarget, orNull, pathKind, realOrNull } from '../spawn/tree.ts';
import type { WatchedLimits } from '../spawn/limits.ts';
import { startedByServer, type SandboxMode } from '../spawn/sandbox-mode.ts';
import type { RunGate } from './egress.ts';
import type { ResolvedProvider } from './providers.ts';
import { dropRunLayer } from '../spawn/provider-home.ts';
import { setting } from '../settings-registry.ts';
import { isRoutedRepoName } from './spec.ts';
import { redactSecrets } from './text.ts';

/** How this run's agents are confined: the mode, and (sandboxed) the egress gate that is their only route out. */
export interface RunSandbox {
  mode: SandboxMode;
  gate: RunGate | null;
  /** Added to every provider's and check's environment: the plan's passed names, then the gate's variables. */
  env: Record<string, string>;
  /** The key of the provider home the plan names (run-plan.ts `provider_home`); absent: from the worker's env. */
  providerHome?: string;
}

export type ProtocolFiles = ReturnType<typeof protocolFiles>;

/** The run's protocol files: the task the agent reads, and the folders its question and its answer live in. */
export function protocolFiles(ctx: RunContext) {
  // Each level made as needed and held open, none a link.
  withDir(openRunDir(ctx.dir), (run) => {
    for (const name of ['ask', 'answer']) makePlainDirsIn(run, ['io', name], 0o777).close();
  });
  const ioDir = join(ctx.dir, 'io');
  const askDir = join(ioDir, 'ask');
  // Writable inside: an agent that read its answer removes the file to say so.
  const answerDir = join(ioDir, 'answer');
  return {
    taskFile: join(ioDir, 'prompt.md'), answerFile: join(answerDir, 'answer.txt'),
    questionFile: join(askDir, 'question.txt'), ioDir, askDir, answerDir,
  };
}

const MIB = 1024 * 1024;

// A URL's user name and password, wherever a config value holds one, and its query and fragment, where tokens ride
// too (`?private_token=`, `?access_token=`) and nothing git needs to find a repository does. Exported for the
// security suite, which loads it by name (test/security-boundary/log-secrets.test.ts).
export const scrubbed = (text: string): string => redactSecrets(text, 'bare');
// What git needs of the config inside, by key (`section.*`: a section's keys outside subsections; `<sub>`: any
// subsection): the repository's format and worktree, its remotes, branches and submodules, url rewrites, the author,
// how it pulls and merges, its hooks path (hooks run inside, as the agent's own programs do), TLS trust, and of the
// system config which folders git may trust. Everything else is left out: credential helpers, http.<url>.extraheader
// (actions/checkout's token), a client certificate or cookie file, http.proxy (the gate is the only route out),
// sendemail's password, a tool's token (github.token, hub.oauthtoken), includes, and the keys naming a host program
// git would run (core.fsmonitor, core.sshcommand, filter, diff and merge drivers, a submodule's update command).
const KEPT = new Set(['core.*', 'extensions.*', 'index.*', 'feature.*', 'pull.*', 'merge.*', 'user.name',
  'user.email', 'safe.directory', ...['sslverify', 'sslcainfo', 'sslcapath', 'postbuffer', 'version']
    .flatMap((key) => [`http.${key}`, `http.<sub>.${key}`]),
  'remote.<sub>.url', 'remote.<sub>.pushurl', 'remote.<sub>.fetch', 'remote.<sub>.push', 'remote.<sub>.mirror',
  'remote.<sub>.tagopt', 'remote.<sub>.prune', 'remote.<sub>.promisor', 'remote.<sub>.partialclonefilter',
  'branch.<sub>.remote', 'branch.<sub>.pushremote', 'branch.<sub>.merge', 'branch.<sub>.rebase',
  'submodule.active', 'submodule.recurse', 'submodule.<sub>.url', 'submodule.<sub>.active',
  'submodule.<sub>.branch', 'submodule.<sub>.ignore', 'url.<sub>.insteadof', 'url.<sub>.pushinsteadof',
  'lfs.url', 'lfs.pushurl', 'lfs.repositoryformatversion', 'lfs.<sub>.access', 'lfs.<sub>.locksverify',
  // Git LFS's own filter (`git lfs install --local`, actions/checkout's `lfs: true`): without it a commit inside
  // would store an LFS file's bytes instead of its pointer. It runs inside the sandbox, as the agent's programs do.
  'filter.lfs.clean', 'filter.lfs.smudge', 'filter.lfs.process', 'filter.lfs.required']);
const CORE_PROGRAMS = /^core\.(?:alternaterefscommand|askpass|editor|fsmonitor|gitproxy|pager|sshcommand)$/;
// `key` as git names it: `section.key` or `section.<subsection as written>.key`, section and key in lower case.
const kept = (sub: boolean, key: string): boolean => !CORE_PROGRAMS.test(key) &&
  ((!sub && KEPT.has(key.replace(/\..*/s, '.*'))) || KEPT.has(key) ||
    (sub && KEPT.has(key.replace(/\..*\./s, '.<sub>.'))));
const quoted = (text: string) => `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')
  .replace(/\t/g, '\\t')}"`;

/** `git config -z --list` output as a config file of what git needs inside, no credentials (agentGitConfigs). */
function configWithoutCredentials(listing: string): string {
  const lines: string[] = [];
  for (const entry of listing.split('\0').filter(Boolean)) {
    const cut = entry.indexOf('\n');
    const key = cut < 0 ? entry : entry.slice(0, cut);
    const [first, last] = [key.indexOf('.'), key.lastIndexOf('.')];
    const sub = scrubbed(key.slice(first + 1, last));
    if (first < 0 || !kept(first !== last, key)) continue;
    lines.push(first === last ? `[${key.slice(0, first)}]` : `[${key.slice(0, first)} ${quoted(sub)}]`,
      `\t${key.slice(last + 1)}${cut < 0 ? '' : ` = ${quoted(scrubbed(entry.slice(cut + 1)))}`}`);
  }
  return lines.length ? `${lines.join('\n')}\n` : '';
}

// A config line as plain as git writes it: a section header, or `key = value` with no quote, escape or comment. Only
// space and tab around it (and a CRLF's \r): git's whitespace, where \s would also take \f, \v or U+00A0, which git
// refuses, so that a config svc calls plain is one git reads.
const HEADER = /^[ \t]*\[([a-z0-9-]+)(?:[ \t]+"([^"\\]*)")?\][ \t]*\r?$/i;
const ENTRY = /^[ \t]*([a-z][a-z0-9-]*)[ \t]*(?:=[^"\\;#]*)?\r?$/i;

/** Config text of only plain lines: its lines of keys KEPT (`same` when that copy is the file byte for byte, a config
 * shown as it is), read in svc with no git run, when none of those names a secret (a URL's user name, query or
 * fragment). Null for anything less plain, which git reads. */
function plainCopy(text: string): { text: string; same: boolean } | null {
  const lines: string[] = [];
  // The current section as git's keys begin (`section.` or `section.<subsection as written>.`); its header line, until
  // a line of it is copied.
  let section: string | null = null;
  let sub = false;
  let header: string | null = null;
  for (const line of text.split('\n')) {
    if (/^[ \t]*(?:[#;].*)?\r?$/.test(line)) continue;
    const head = HEADER.exec(line);
    if (head) {
      sub = head[2] !== undefined;
      [section, header] = [`${head[1]!.toLowerCase()}.${sub ? `${head[2]}.` : ''}`, line];
      continue;
    }
    const key = ENTRY.exec(line)?.[1]?.toLowerCase();
    if (!key || section === null) return null;
    // A plain line is one whole entry (no quote, escape or continuation): leaving it out takes nothing else with it.
    if (!kept(sub, `${section}${key}`)) continue;
    // Only what is copied is looked at: a line left out may name a header's credential (http.extraheader).
    const copied = header === null ? [line] : [header, line];
    if (copied.some((l) => scrubbed(l) !== l)) return null;
    lines.push(...copied);
    header = null;
  }
  const copy = lines.length ? `${lines.join('\n')}\n` : '';
  return { text: copy, same: copy === text };
}

/** The config files of the repository's git directory `common`: its own and its worktrees' `config.worktree`, and each
 * submodule's under `modules/` (a name may hold slashes; a submodule's own submodules under its `modules/`). A link is
 * named by its target: that is the file to cover (bwrap mounts on a link's target), where the view shows it. */
function gitConfigFiles(common: string): string[] {
  const found: string[] = [];
  // A linked worktree keeps its submodules' git directories under its own folder (worktrees/<tree>/modules/).
  const own = (dir: string, depth: number): void => {
    found.push(join(dir, 'config'), join(dir, 'config.worktree'));
    for (const tree of orNull(() => readdirSync(join(dir, 'worktrees'))) ?? []) {
      found.push(join(dir, 'worktrees', tree, 'config.worktree'));
      walk(join(dir, 'worktrees', tree, 'modules'), depth + 1);
    }
    walk(join(dir, 'modules'), depth + 1);
  };
  const walk = (dir: string, depth: number): void => {
    for (const entry of orNull(() => readdirSync(dir, { withFileTypes: true })) ?? []) {
      const sub = join(dir, entry.name);
      if (!entry.isDirectory() || depth > 16) continue;
      if (pathKind(join(sub, 'HEAD')) === 'file') own(sub, depth);
      else walk(sub, depth + 1);
    }
  };
  own(common, 0);
  return found.map((file) => linkTarget(file))
    .filter((file): file is string => file !== null && pathKind(file) === 'file');
}

// The copies git made for a run, by the file they stand for: made once, at the first sandbox that needs each. Which
// files need one is decided again at every start (a config made plain then holding a credential is copied then).
const copiesOf = new WeakMap<RunContext, Map<string, string>>();

// The host's system git config (a distribution's git; one built with prefix /usr/local): the view shows its folder.
// Not GIT_CONFIG_SYSTEM: the agent's environment does not carry it, so the agent's git reads its built-in location.
const SYSTEM_CONFIGS = ['/etc/gitconfig', '/usr/local/etc/gitconfig'];

/**
 * The repository's git configs and the system's as its agents and checks see them, each in place of its file (DESIGN
 * §7a "It sees only what it needs"): the file's own keys git needs there (KEPT; its includes neither followed nor
 * kept), user names, passwords and queries stripped from URLs, so without the credentials a checkout's or a build
 * host's config usually holds (a token in a remote's URL or an `insteadOf` base, the Authorization header
 * actions/checkout keeps as http.<url>.extraheader, in a submodule's config too); kept in the run's io folder. A
 * config that is its own copy (only plain lines KEPT lists) is shown as it is, one of other plain lines copied in svc
 * (plainCopy), anything else listed by git; one git cannot read is shown empty, never as it is.
 */
function agentGitConfigs(ctx: RunContext, ioDir: string): NonNullable<SandboxPlan['covers']> {
  const copies = copiesOf.get(ctx) ?? new Map<string, string>();
  copiesOf.set(ctx, copies);
  // A Set: a repository config linked to a system config is one file, covered once.
  const plain = new Map([...new Set([...gitConfigFiles(join(ctx.state.repo_path, '.git')),
    ...SYSTEM_CONFIGS.filter((file) => pathKind(file, true) === 'file')])]
    .map((file) => [file, plainCopy(orNull(() => readFileSync(file, 'utf8')) ?? '[unreadable')] as const));
  const configs = [...plain].filter(([, copy]) => copy?.same !== true).map(([file]) => file);
  const fresh = configs.filter((file) => !copies.has(file));
  if (fresh.length) {
    withDir(openRunDir(ctx.dir), (run) => withDir(makePlainDirsIn(run, ['io'], 0o777), (io) => {
      for (const file of fresh) {
        const name = `git-config-${copies.size}`;
        // Includes are not followed: an include.path or includeIf, or a link the run committed, would name a host file.
        const copy = plain.get(file)?.text
          ?? configWithoutCredentials(tryGit('/', ['config', '--file', file, '--no-includes', '-z', '--list']));
        replaceNoFollowIn(io, name, copy);
        copies.set(file, name);
      }
    }));
  }
  return configs.map((target) => ({ source: join(ioDir, copies.get(target)!), target }));
}

/**
 * svc's share of the policy limits, watched while the agent (or a check) runs in `workdir`. The disk limit holds for
 * every host folder its `sandbox` binds writable too: a built-in provider's (the invocation's fresh ones, its
 * repository's kept session state) and those declared writable for a `command` provider (by the operator, or a file
 * its person trusted). They are on the host's disk, not HOME's tmpfs, and an agent filling one fills that disk.
 */
export function watchedLimits(
  limits: RunLimits, workdir: string, files: ProtocolFiles, sandbox: { plan: SandboxPlan } | null = null,
): WatchedLimits {
  const plan = sandbox?.plan;
  const homes = (plan?.homeMounts ?? []).filter((m) => m.writable).map((m) => m.source);
  const others = [...homes, ...(plan?.writable ?? [])].filter((dir) => !within(dir, workdir));
  // Each counts once: a run in the checkout has its run folder inside its tree; a folder inside another is in it (a
  // declared folder may hold the worktree).
  const all = [...new Set([workdir, files.askDir, files.answerDir, ...others])];
  const diskDirs = all.filter((dir) => !all.some((other) => other !== dir && within(dir, other)));
  const diskWhat = others.length ? 'the worktree, the question and answer folders and the provider\'s folders'
    : diskDirs.length > 1 ? 'the worktree and the question and answer folders' : 'the worktree';
  const { processes, memory_mb, disk_mb } = limits;
  return { processes, memoryBytes: memory_mb * MIB, diskDirs, diskWhat, diskBytes: disk_mb * MIB };
}

/** The sandbox for `program` (a provider of family `provider`, or a check when `provider` is null). */
export function agentSandbox(
  ctx: RunContext, sandbox: RunSandbox, program: string, provider: ResolvedProvider | null, limits: RunLimits,
): { bwrap: string; plan: SandboxPlan } | null {
  const { mode } = sandbox;
  if (mode.kind === 'none') return null;
  const files = protocolFiles(ctx);
  const home = homeOf(ctx.env);
  const plan = agentSandboxPlan({
    workdir: ctx.state.workdir, repo: ctx.state.repo_path, ioDir: files.ioDir, askDir: files.askDir,
    answerDir: files.answerDir, svcHome: svcHomeOf(ctx.env), home,
    provider: provider?.kind ?? 'check',
    // A command provider's folders as the settings rule allowed them; a built-in's come from its provider home.
    declared: provider?.kind === 'command' ? provider.writable ?? [] : [],
    providerHome: provider && provider.kind !== 'command' ? {
      template: providerTemplate(ctx.env, home),
      repoHome: providerHomeDir(ctx.env, ctx.state.repo_path, provider, sandbox.providerHome),
      run: ctx.state.run, gateEnv: sandbox.gate?.env,
    } : null,
    // A check is the repository's program, like its command provider: an absolute one shows only its file, never the
    // folder it sits in (another checkout's gradlew would show that whole checkout).
    program, showProgramFolder: provider !== null && (provider.kind !== 'command' || provider.showFolder !== false),
    env: ctx.env, covers: agentGitConfigs(ctx, files.ioDir),
    // The kernel's share of the policy limits (prlimit inside the sandbox).
    limits: {
      processes: limits.processes, memoryBytes: limits.memory_mb * MIB, fileBytes: limits.file_mb * MIB,
      tmpBytes: Math.min(limits.disk_mb, 1024) * MIB,
    },
    gate: sandbox.gate?.sandbox ?? null,
    note: (text) => noteOnce(ctx, text),
  });
  return { bwrap: mode.bwrap, plan };
}

// A folder left out is the same for every invocation and check of the run: said once in its log.
const noted = new WeakMap<RunContext, Set<string>>();

function noteOnce(ctx: RunContext, text: string): void {
  const said = noted.get(ctx) ?? new Set<string>();
  noted.set(ctx, said);
  if (said.has(text)) return;
  said.add(text);
  ctx.event('log', { stream: 'svc', text });
}

/** Once the provider is done: its invocations' fresh folders go (what it kept stays in the repository's home). */
export function releaseProviderHome(ctx: RunContext, sandbox: RunSandbox, provider: { kind: string }): void {
  if (sandbox.mode.kind === 'none' || provider.kind === 'command') return;
  // One that cannot be removed is left for the run's next invocation to replace, or for the operator to remove with
  // the home.
  orNull(() =>
    dropRunLayer(providerHomeDir(ctx.env, ctx.state.repo_path, provider, sandbox.providerHome), ctx.state.run));
}

// Which provider home a run's agent gets (docs/engine.md "Provider homes"): one per provider and repository, keyed by
// who the run is for, never by the repository's files. The key: a readable slug, then a hash of the whole identity.
function keyOf(label: string, identity: string): string {
  const slug = label.toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^[.-]+/, '').slice(0, 40) || 'repo';
  return `${slug}-${hash('sha256', identity, 'hex').slice(0, 16)}`;
}

/** The home's key for a run of the repository at `repoPath` started with `env`; throws on a malformed scope. */
export function providerHomeKey(repoPath: string, env: NodeJS.ProcessEnv): string {
  const scope = !startedByServer(env) ? setting(env, 'SVC_PROVIDER_HOME_SCOPE') : undefined;
  if (scope) return `scope-${scope}`;
  // A `local/<folder>` name is a checkout's folder name, which another checkout may share: its path is its identity.
  const served = isRoutedRepoName(env) && !/^local\//i.test(env.SVC_REPO_NAME!);
  if (served) return keyOf(env.SVC_REPO_NAME!.replace('/', '-'), `served:${env.SVC_REPO_NAME}`);
  // A checkout that is gone by now: its path as recorded is still its identity.
  const real = realOrNull(repoPath) ?? repoPath;
  return keyOf(basename(real), `path:${real}`);
}

/** `~/.svc/homes/<provider>/<key>`, for a built-in CLI by its name; `key` as the run's plan names it, if it does. */
export function providerHomeDir(
  env: NodeJS.ProcessEnv, repoPath: string, provider: { kind: string }, key = providerHomeKey(repoPath, env),
): string {
  return join(svcHomeOf(env), 'homes', provider.kind, key);
}

/** The operator's template for what the CLIs obey: ~/.svc/provider-template when it is a folder, else HOME itself. */
export function providerTemplate(env: NodeJS.ProcessEnv, home: string): string {
  const explicit = join(svcHomeOf(env), 'provider-template');
  return pathKind(explicit, true) === 'dir' ? explicit : home;
}
