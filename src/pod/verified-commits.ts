// The signer's own copy of a run's commits, every object re-hashed on the way in (docs/deploy.md "What a receipt from
// a pod attests"): a bare repository reads the workspace's objects through `alternates`, and they are fetched into a
// clean one, where index-pack names every object by its hash. Never runs git in the workspace, trusts a commit id the
// clean repository does not hold, or runs a git without a time limit (a hostile workspace must end the job).
import { RefusedError, errorMessage } from '../errors.ts';
import { lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, resolve, sep } from 'node:path';
import { git, hostGit, specialKind, type GitRun } from '../engine/git.ts';
import { diffCommits, type DiffResult } from '../engine/diff.ts';
import { parsePolicy, DEFAULT_POLICY, PolicyError, type Policy } from '../engine/policy.ts';
import { COMMIT_ID } from './seal.ts';
import { tryParseJson } from '../untrusted.ts';
import { realOrNull } from '../spawn/tree.ts';

export class UnverifiableError extends RefusedError {}

interface VerifiedCommits {
  /** Bare repository holding base, head and what lies between, with refs/heads/<branch> at head. */
  repo: string;
  diff: DiffResult;
}

/** The hardened host git (hostGit, whose environment keeps no GIT_* variable but who commits and how to reach a
 * server), killed after `timeoutMs`: the job's own deadline is hours away. */
export function signerGit(timeoutMs = 5 * 60_000): GitRun {
  return (cwd, argv, opts) => hostGit(cwd, argv, { ...opts, timeout: timeoutMs });
}

/** git reads object folders of alternates that name alternates, five deep (git's own limit). */
const ALTERNATE_DEPTH = 5;

/**
 * Refuses, before any git runs, an object folder (or an alternate it names, which must be inside the workspace)
 * holding anything but regular files and folders: a FIFO blocks the git that opens it, a device never ends.
 */
function refuseSpecialFiles(objects: string, root: string, depth = 0): void {
  // By hand, each entry checked as it is listed: readdirSync's own recursion follows links to folders (Node 24).
  const pending = [objects];
  while (pending.length) {
    const dir = pending.pop()!;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const kind = specialKind(path, false);
      if (kind) throw new UnverifiableError(`The workspace's git objects hold a special file: ${path} is ${kind}`);
      if (entry.isDirectory()) pending.push(path);
    }
  }
  const alternates = join(objects, 'info', 'alternates');
  if (lstatSync(alternates, { throwIfNoEntry: false }) === undefined) return;
  for (const line of readFileSync(alternates, 'utf8').split('\n')) {
    const named = line.trim();
    if (named === '' || named.startsWith('#')) continue;
    const dir = realOrNull(isAbsolute(named) ? named : resolve(objects, named));
    if (dir === null) continue; // git skips an alternate it cannot open
    if (!dir.startsWith(root + sep)) throw new UnverifiableError('The workspace\'s git objects borrow from outside it');
    if (depth >= ALTERNATE_DEPTH) throw new UnverifiableError('The workspace\'s git alternates nest too deep');
    refuseSpecialFiles(dir, root, depth + 1);
  }
}

/** The workspace's object folder, refused when it (or .git) leads outside the workspace through a symbolic link. */
function objectsDirOf(workspace: string): string {
  const gitDir = join(workspace, '.git');
  const st = lstatSync(gitDir, { throwIfNoEntry: false });
  if (!st || !st.isDirectory()) throw new UnverifiableError('The workspace has no .git folder');
  const root = realpathSync(workspace);
  const objects = realpathSync(join(gitDir, 'objects'));
  if (!objects.startsWith(root + sep)) throw new UnverifiableError('The workspace\'s git objects lead outside it');
  refuseSpecialFiles(objects, root);
  return objects;
}

/** In a fresh bare repository of ours: `git` with its config and nothing else (no templates, no hooks). */
function bare(path: string, run: GitRun): (args: string[]) => string {
  const templates = `${path}.templates`;
  mkdirSync(templates, { recursive: true });
  git('/', ['init', '--quiet', '--bare', path], { GIT_TEMPLATE_DIR: templates }, run);
  return (args) => git(path, args, { GIT_DIR: path }, run);
}

/**
 * Copies base..head from the workspace into `scratch`/clean.git, hash-checked, and diffs them there; `originUrl`
 * becomes its origin. Throws UnverifiableError for anything that leaves the run's commits unestablished.
 */
export function verifyCommits(
  workspace: string, scratch: string, base: string, head: string, branch: string, originUrl: string | null = null,
): VerifiedCommits {
  if (!COMMIT_ID.test(base) || !COMMIT_ID.test(head)) throw new UnverifiableError('The run reported no head commit');
  const objects = objectsDirOf(workspace);
  try {
    return copyAndDiff(objects, scratch, base, head, branch, originUrl, signerGit());
  } catch (err) {
    if (err instanceof UnverifiableError) throw err;
    throw new UnverifiableError(`The signer's git failed: ${errorMessage(err)}`);
  }
}

function copyAndDiff(
  objects: string, scratch: string, base: string, head: string, branch: string, originUrl: string | null, run: GitRun,
): VerifiedCommits {
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true, mode: 0o700 });
  const borrowPath = join(scratch, 'borrow.git');
  const borrow = bare(borrowPath, run);
  writeFileSync(join(borrowPath, 'objects', 'info', 'alternates'), `${objects}\n`);
  // Index files the agent could have planted beside the objects (they guide the walk, never name content): unused.
  borrow(['config', 'core.commitGraph', 'false']);
  borrow(['config', 'core.multiPackIndex', 'false']);
  // base is where the signer's history ends: nothing older is read or sent.
  writeFileSync(join(borrowPath, 'shallow'), `${base}\n`);
  try {
    borrow(['update-ref', 'refs/svc/base', base]);
    borrow(['update-ref', 'refs/svc/head', head]);
  } catch {
    const named = `commit ${head.slice(0, 12)} or the sealed base ${base.slice(0, 12)}`;
    throw new UnverifiableError(`The workspace does not hold ${named}`);
  }
  const repo = join(scratch, 'clean.git');
  const clean = bare(repo, run);
  try {
    clean(['-c', 'transfer.fsckObjects=true', '-c', 'protocol.file.allow=always', 'fetch', '--quiet', '--no-tags',
      '--update-shallow', `file://${borrowPath}`, `refs/svc/head:refs/heads/${branch}`,
      'refs/svc/base:refs/svc/base']);
  } catch (err) {
    throw new UnverifiableError(`The run's commits did not pass the hash check: ${errorMessage(err)}`);
  }
  if (clean(['rev-parse', '--verify', `refs/heads/${branch}^{commit}`]).trim() !== head) {
    throw new UnverifiableError('The fetched head is not the reported commit');
  }
  try {
    clean(['merge-base', '--is-ancestor', base, head]);
  } catch {
    const named = `Commit ${head.slice(0, 12)}`;
    throw new UnverifiableError(`${named} does not descend from the sealed base ${base.slice(0, 12)}`);
  }
  rmSync(borrowPath, { recursive: true, force: true });
  // The PR push reads origin from this repository's config (src/engine/git-push.ts): ours, holding the sealed URL.
  if (originUrl) clean(['config', 'remote.origin.url', originUrl]);
  let diff: DiffResult;
  try {
    diff = diffCommits(repo, base, head, run);
  } catch (err) {
    throw new UnverifiableError(`The run's commits could not be diffed: ${errorMessage(err)}`);
  }
  return { repo, diff };
}

/** `.svc/policy.json` as the base commit holds it (the checks the agent could not choose); defaults when absent. */
export function policyAt(repo: string, base: string): Policy {
  const run = signerGit();
  let text: string;
  try {
    // Absent is the defaults; any other failure (a git out of time) must not quietly become "no checks required".
    const listed = git(repo, ['ls-tree', '--name-only', base, '--', '.svc/policy.json'], { GIT_DIR: repo }, run);
    if (listed.trim() === '') return DEFAULT_POLICY;
    text = git(repo, ['cat-file', 'blob', `${base}:.svc/policy.json`], { GIT_DIR: repo }, run);
  } catch (err) {
    throw new UnverifiableError(`The base commit's policy could not be read: ${errorMessage(err)}`);
  }
  const raw = tryParseJson(text);
  if (raw === undefined) throw new PolicyError('policy.json at the base commit is not valid JSON');
  return parsePolicy(raw);
}
