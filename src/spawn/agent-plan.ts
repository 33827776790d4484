// What an agent (a provider or a check) may see and write inside its sandbox (DESIGN §7a; docs/engine.md "The agent
// sandbox" has the rule in words). Nothing is mounted but what the plan names, so svc's home and every credential are
// simply absent; the masks in `hidden` only matter where a bound tree (a declared folder, a PATH folder) holds one.
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { isSecretName } from './start.ts';
import { layProviderHome, type ProviderHomeSource } from './provider-home.ts';
import { hiddenHolding, isSystemPath, within, type SandboxPlan } from './bwrap-argv.ts';
import type { SandboxGate } from './sandbox-command.ts';
import { linkTarget, orNull, readOrNull, realOrNull } from './tree.ts';
import { HOME_CREDENTIALS, neverWritable } from './never-writable.ts';
import { DEFAULT_LIMITS, type SandboxLimits } from './limits.ts';

interface AgentPlanInput {
  /** The run's worktree, or the repository itself for a run without one. */
  workdir: string;
  repo: string;
  /** Folder holding the task (read-only inside), and the folders the question and the answer live in (writable). */
  ioDir: string;
  askDir: string;
  answerDir: string;
  svcHome: string;
  home: string;
  /** A builtin name, "command", or "check"; `declared`: the folders a command provider declares writable. */
  provider: string;
  declared: string[];
  /** Null for a check or a `command` provider. */
  providerHome?: ProviderHomeSource | null;
  /** The program about to run: its install stays visible, or with `showProgramFolder` false its file alone. */
  program: string;
  showProgramFolder?: boolean;
  /** svc's own environment: names the credential files and folders to mask, and PATH to keep visible. */
  env: NodeJS.ProcessEnv;
  limits?: SandboxLimits;
  /** The run's egress gate (its only route out); null: no network at all. */
  gate: SandboxGate | null;
  /** Told why a declared folder is left out, for the run's log. */
  note?: (text: string) => void;
  /** Files shown in place of others: the repository's git configs without their credentials (engine/sandbox.ts). */
  covers?: SandboxPlan['covers'];
}

/** Path names of credential files and data svc was configured with (env values). */
function configuredSecretPaths(env: NodeJS.ProcessEnv): string[] {
  const paths: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!value || !isAbsolute(value)) continue;
    if (name.endsWith('_FILE') && isSecretName(name)) paths.push(value);
    if (name === 'SVC_CONTROL_DB' || name === 'SVC_TRIGGER_DB') paths.push(value, `${value}-wal`, `${value}-shm`);
    if (name === 'CREDENTIALS_DIRECTORY' || name === 'SVC_CONTROL_ANSWER_DIR') paths.push(value);
  }
  return paths;
}

/** The repository's git directories as seen from `workdir`: `.git` itself, and where a worktree's `.git` points. */
function gitDirs(workdir: string, repo: string): string[] {
  const target = /^gitdir:\s*(.+)$/m.exec(readOrNull(join(workdir, '.git')) ?? '')?.[1]?.trim();
  return target ? [join(repo, '.git'), resolve(workdir, target)] : [join(repo, '.git')];
}

/**
 * The folders a command provider declared writable (a relative one is under HOME) that its sandbox binds, judged again
 * at each start. One inside the working tree is writable with the tree and never bound by its name: a link the
 * repository committed there, or one an earlier invocation's agent put in a kept folder's place, would bind whatever
 * it points to. One elsewhere in the repository (another run's worktree, in a retried run's plan) is the repository's
 * content too, and left out; what is left is the operator's grant (or a trusted file's), never a never-writable folder.
 */
export function declaredFolders(
  input: Pick<AgentPlanInput, 'home' | 'declared' | 'workdir' | 'repo' | 'env' | 'note'>,
): string[] {
  const { home, workdir, repo } = input;
  const pathDirs = (input.env.PATH ?? '').split(':').filter(isAbsolute);
  const inRepository = (p: string) => [workdir, repo].some((d) => within(p, d) || within(p, realOrNull(d) ?? d));
  const bound: string[] = [];
  for (const path of input.declared.map((p) => (p.startsWith('/') ? p : join(home, p)))) {
    if (within(path, workdir)) continue;
    const never = neverWritable(path, home, pathDirs);
    const real = realOrNull(path);
    if (never) input.note?.(`writable folder "${path}" is never writable (${never}): left out`);
    else if (inRepository(path) || (real !== null && inRepository(real))) {
      input.note?.(`writable folder "${path}" is in the repository, outside the run's working tree: left out`);
    } else bound.push(path);
  }
  return bound;
}

/** Folders named by absolute path are made on first use, so a CLI can keep what it writes there between runs. */
function ensureFolders(paths: string[]): void {
  for (const path of paths) {
    if (existsSync(path) || /\.(json|ya?ml|toml)$/.test(path)) continue;
    // One that cannot be made is left missing: the CLI will say what it could not write.
    orNull(() => mkdirSync(path, { recursive: true, mode: 0o700 }));
  }
}

/** The folder a program really lives in: an npm-installed CLI's whole `node_modules`, else its folder. */
function installOf(path: string): string {
  const modules = path.lastIndexOf('/node_modules/');
  return modules > 0 ? path.slice(0, modules + '/node_modules'.length) : dirname(path);
}

/** Where `program` and the PATH folders' entries really live (links in `.bin` point into packages). */
function programFolders(program: string, pathDirs: string[], ownFolder: boolean): string[] {
  const folders: string[] = [];
  const real = isAbsolute(program) ? realOrNull(program) : null;
  if (isAbsolute(program)) folders.push(ownFolder ? dirname(program) : program);
  if (real) folders.push(ownFolder ? installOf(real) : real);
  for (const dir of pathDirs) {
    if (isSystemPath(dir)) continue;
    if (dir.endsWith('/node_modules/.bin')) {
      folders.push(dir.slice(0, -'/.bin'.length));
      continue;
    }
    const entries = orNull(() => readdirSync(dir, { withFileTypes: true }))?.slice(0, 500) ?? [];
    // Only links can point elsewhere; the folder's own files are shown with it (pyenv's shims are scripts).
    for (const entry of entries) {
      if (!entry.isSymbolicLink()) continue;
      const target = realOrNull(join(dir, entry.name));
      if (target && !within(target, dir)) folders.push(installOf(target));
    }
  }
  return folders;
}

/** PATH folders worth showing: absolute, present, and not a folder that would show a home or svc's home whole. */
function pathFolders(env: NodeJS.ProcessEnv, home: string, svcHome: string): string[] {
  return (env.PATH ?? '').split(':').filter((d) => isAbsolute(d) && existsSync(d) && d !== '/')
    .map((d) => realOrNull(d) ?? d)
    .filter((d) => !within(home, d) && !within(svcHome, d) && !within(d, svcHome));
}

/** Drops duplicates and paths inside another kept one (fewer bwrap arguments, same view). */
function outermost(paths: string[], avoid: (p: string) => boolean): string[] {
  const unique = [...new Set(paths.filter((p) => p !== '/' && !avoid(p)))].sort((a, b) => a.length - b.length);
  const kept: string[] = [];
  for (const path of unique) if (!kept.some((k) => within(path, k))) kept.push(path);
  return kept;
}

/**
 * Each path and, where a link makes it another folder, that folder too: PATH folders are bound by their real path, so
 * a mask spelled through a linked HOME (or a ~/.ssh linked into a dotfiles folder) would miss what they show.
 */
function withRealSpellings(paths: string[]): string[] {
  return [...new Set(paths.flatMap((p) => [p, realOrNull(p) ?? p]))];
}

/** What every sandbox hides besides svc's home: the run files of the repository, HOME's credentials, svc's secrets. */
function secretsOf(input: Pick<AgentPlanInput, 'repo' | 'home' | 'env'>): string[] {
  return [
    join(input.repo, '.svc', 'runs'),
    join(input.repo, '.svc', 'inbox'),
    ...HOME_CREDENTIALS.map((p) => join(input.home, p)),
    ...configuredSecretPaths(input.env),
  ];
}

export function agentSandboxPlan(input: AgentPlanInput): SandboxPlan {
  // A built-in CLI's own folders are laid from its provider home; those granted a `command` provider bound in place.
  const folders = declaredFolders(input);
  const mounts = input.providerHome
    ? layProviderHome({ provider: input.provider, home: input.home, ...input.providerHome })
    : [];
  ensureFolders(folders);
  const engine = join(input.repo, '.svc');
  const git = gitDirs(input.workdir, input.repo);
  const paths = pathFolders(input.env, input.home, input.svcHome);
  const { svcHome } = input;
  const program = programFolders(input.program, paths, input.showProgramFolder !== false);
  const readable = outermost([...git, ...paths, ...program],
    (p) => within(p, svcHome) || within(input.home, p));
  const plan: SandboxPlan = {
    readable,
    writable: [input.workdir, ...folders.filter((f) => !within(f, svcHome) && !within(svcHome, f))],
    // Its git metadata; in the repository itself, the project's .svc (its policy decides the checks); the git
    // directories again, in case a declared folder covers them.
    protect: [join(input.workdir, '.git'), ...(resolve(input.workdir) === resolve(input.repo) ? [engine] : []), ...git],
    covers: input.covers ?? [],
    hidden: withRealSpellings([svcHome, join(engine, 'worktrees'), ...secretsOf(input)]),
    protocolReadable: [input.ioDir],
    protocolWritable: [input.askDir, input.answerDir],
    home: input.home,
    homeMounts: mounts,
    cwd: input.workdir,
    limits: input.limits ?? DEFAULT_LIMITS,
    network: input.gate ?? 'none',
  };
  noteLeftInHidden(plan, paths, input.note);
  return plan;
}

/**
 * Says which folders of `plan` bwrapArgv leaves out for lying in a hidden path (~/.aws/bin on PATH), as a declared
 * folder left out is said: else the agent only finds "command not found" there. `pathDirs`: the folders on PATH.
 */
function noteLeftInHidden(plan: SandboxPlan, pathDirs: string[], note: AgentPlanInput['note']): void {
  const folders = [
    ...plan.readable.map((path) => ({ path, what: pathDirs.includes(path) ? 'folder on PATH' : 'folder' })),
    ...plan.writable.filter((path) => path !== plan.cwd).map((path) => ({ path, what: 'writable folder' })),
  ];
  for (const { path, what } of folders) {
    const holder = hiddenHolding(plan, path);
    if (holder !== undefined && existsSync(path)) {
      note?.(`${what} "${path}" is in "${holder}", which the sandbox hides: left out`);
    }
  }
}

/**
 * The view svc's own git gets over the agent's work (docs/engine.md "Nothing the agent wrote runs outside a
 * sandbox"); `scratch`: what it writes besides the worktree and the git directory (a throwaway index).
 */
export function gitSandboxPlan(
  input: Pick<AgentPlanInput, 'workdir' | 'repo' | 'home' | 'svcHome' | 'env'> & { scratch: string[] },
): SandboxPlan {
  const git = gitDirs(input.workdir, input.repo);
  const common = git[0]!;
  const paths = pathFolders(input.env, input.home, input.svcHome);
  // The user's own git config (git-lfs's filter is set there) is trusted; the repository's is read-only below.
  const userConfig = [join(input.home, '.gitconfig'), join(input.home, '.config', 'git')];
  return {
    readable: [...outermost(paths, (p) => within(p, input.svcHome)), ...userConfig],
    writable: [input.workdir, ...git, ...input.scratch],
    // A linked one by its target (bwrap would resolve an absolute link from outside the view): protected where that
    // lies in a writable folder; elsewhere svc's git cannot write it anyway, and bwrapArgv binds nothing there.
    protect: [join(common, 'config'), join(common, 'hooks'), join(common, 'info'),
      ...git.slice(1).map((d) => join(d, 'config.worktree')), join(input.repo, '.svc')].map((p) => linkTarget(p) ?? p),
    hidden: withRealSpellings([input.svcHome, ...secretsOf(input)]),
    protocolReadable: [],
    protocolWritable: [],
    home: input.home,
    cwd: input.workdir,
    limits: DEFAULT_LIMITS,
    network: 'none',
  };
}
