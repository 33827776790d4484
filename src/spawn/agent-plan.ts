// What an agent (a provider or a check) may see and write inside its sandbox (DESIGN §7a; docs/engine.md "The agent
// sandbox"). The rule, in words: the whole filesystem read-only; the run's working directory and the provider's own
// config and login folders writable; the repository's git directory read-only (svc commits the agent's work after it
// exits, so the agent never needs to write it, and cannot plant hooks or URL rules in it); svc's home (~/.svc: keys,
// tokens, databases, answers), every credential file svc was told about and every other run's folder invisible; a
// private /tmp; and the run's protocol files: the task and answer readable, the question folder writable.
import { existsSync, mkdirSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { isSecretName } from './env.ts';
import { providerFolders } from './provider-folders.ts';
import type { SandboxPlan } from './bwrap-argv.ts';

export interface AgentPlanInput {
  /** The run's working directory: its worktree, or the repository itself for a run without one. */
  workdir: string;
  /** The repository's main checkout. */
  repo: string;
  /** Folder holding the task and answer files (read-only inside) and the folder the question is written to. */
  ioDir: string;
  askDir: string;
  /** svc's home (~/.svc) and the user's home. */
  svcHome: string;
  home: string;
  /** Provider family (a builtin name or "command") and the folders a command provider declares writable. */
  provider: string;
  declared: string[];
  /** The program about to run (its folder stays visible when it lives under /tmp). */
  program: string;
  /** svc's own environment: names the credential files and folders to hide, and PATH to keep visible. */
  env: NodeJS.ProcessEnv;
}

/** Path names of credential files and data svc was configured with (env values), hidden from the agent. */
function configuredSecretPaths(env: NodeJS.ProcessEnv): string[] {
  const paths: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!value || !isAbsolute(value)) continue;
    if (name.endsWith('_FILE') && isSecretName(name)) paths.push(value);
  }
  for (const name of ['SVC_CONTROL_DB', 'SVC_TRIGGER_DB']) {
    const db = env[name];
    if (db && isAbsolute(db)) paths.push(db, `${db}-wal`, `${db}-shm`);
  }
  // systemd's LoadCredential= folder, and the folder the Control Plane writes answers into.
  for (const name of ['CREDENTIALS_DIRECTORY', 'SVC_CONTROL_ANSWER_DIR']) {
    const dir = env[name];
    if (dir && isAbsolute(dir)) paths.push(dir);
  }
  return paths;
}

/** The repository's git directory as seen from `workdir`: `.git` itself, or where a worktree's `.git` file points. */
function gitDirs(workdir: string, repo: string): string[] {
  const dirs = [join(repo, '.git')];
  try {
    const pointer = readFileSync(join(workdir, '.git'), 'utf8');
    const target = /^gitdir:\s*(.+)$/m.exec(pointer)?.[1]?.trim();
    if (target) dirs.push(resolve(workdir, target));
  } catch {
    // a directory (or nothing): the repository's own .git covers it
  }
  return dirs;
}

/** Folder-shaped provider entries are made on first use, so a CLI can write its login under a read-only HOME. */
function ensureFolders(paths: string[]): void {
  for (const path of paths) {
    if (existsSync(path) || /\.(json|ya?ml|toml)$/.test(path)) continue;
    try {
      mkdirSync(path, { recursive: true, mode: 0o700 });
    } catch {
      // left read-only: the CLI will say what it could not write
    }
  }
}

/**
 * Where `program` really lives: an npm-installed CLI is a link in `.bin` to a script that loads its whole package, so
 * the `node_modules` it is in stays visible too (it matters when that is under /tmp).
 */
function programFolders(program: string): string[] {
  if (!isAbsolute(program)) return [];
  const folders = [dirname(program)];
  try {
    const real = realpathSync(program);
    folders.push(dirname(real));
    const modules = real.lastIndexOf('/node_modules/');
    if (modules > 0) folders.push(real.slice(0, modules + '/node_modules'.length));
  } catch {
    // not there: exec will say so
  }
  return folders;
}

export function agentSandboxPlan(input: AgentPlanInput): SandboxPlan {
  const folders = providerFolders(input.provider, input.home, input.declared);
  ensureFolders(folders);
  const pathDirs = (input.env.PATH ?? '').split(':').filter((d) => isAbsolute(d));
  const engine = join(input.repo, '.svc');
  const git = gitDirs(input.workdir, input.repo);
  return {
    visible: [input.home, input.repo, ...git, ...programFolders(input.program), ...pathDirs],
    writable: [input.workdir, ...folders],
    // Inside the writable working directory: its git metadata, and for a run in the repository itself, the project's
    // .svc (policy.json and config.json decide the checks and the providers).
    // .svc (policy.json and config.json decide the checks and the providers); and the git directories again, in case a
    // declared folder covers them.
    protect: [join(input.workdir, '.git'), ...(resolve(input.workdir) === resolve(input.repo) ? [engine] : []), ...git],
    hidden: [
      input.svcHome,
      join(engine, 'runs'),
      join(engine, 'worktrees'),
      join(engine, 'inbox'),
      ...configuredSecretPaths(input.env),
    ],
    protocolReadable: [input.ioDir],
    protocolWritable: [input.askDir],
    cwd: input.workdir,
  };
}
