// The signer's own copy of a run's commits, every object re-hashed on the way in, so the diff it signs and the branch
// it pushes are exactly what the commit ids name. The workspace was writable by the agent: its git config, hooks,
// attributes and refs are never read. Only its object files are, through a bare repository the signer made
// (`objects/info/alternates`), and `git fetch` from that into a second, clean one, where index-pack names every object
// by its own hash (a planted object whose content does not match its name is simply not there) and fsck checks it.
// Must not: run git in the workspace, or trust a commit id the clean repository does not hold.
import { RefusedError } from '../errors.ts';
import { lstatSync, mkdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { join, sep } from 'node:path';
import { git, diffCommits, type DiffResult } from '../engine/git.ts';
import { parsePolicy, DEFAULT_POLICY, PolicyError, type Policy } from '../engine/policy.ts';

export class UnverifiableError extends RefusedError {
  constructor(message: string) {
    super(message);
  }
}

export interface VerifiedCommits {
  /** Bare repository holding base, head and what lies between, with refs/heads/<branch> at head. */
  repo: string;
  diff: DiffResult;
}

const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/** The workspace's object folder, refused when it (or .git) leads outside the workspace through a symbolic link. */
function objectsDirOf(workspace: string): string {
  const gitDir = join(workspace, '.git');
  const st = lstatSync(gitDir, { throwIfNoEntry: false });
  if (!st || !st.isDirectory()) throw new UnverifiableError('The workspace has no .git folder');
  const root = realpathSync(workspace);
  const objects = realpathSync(join(gitDir, 'objects'));
  if (!objects.startsWith(root + sep)) throw new UnverifiableError('The workspace\'s git objects lead outside it');
  return objects;
}

/** In a fresh bare repository of ours: `git` with its config and nothing else (no templates, no hooks). */
function bare(path: string): (args: string[]) => string {
  const templates = `${path}.templates`;
  mkdirSync(templates, { recursive: true });
  git('/', ['init', '--quiet', '--bare', path], { GIT_TEMPLATE_DIR: templates });
  return (args) => git(path, args, { GIT_DIR: path });
}

/**
 * Copies base..head (and base's tree) from the workspace into `scratch`/clean.git, hash-checked, and diffs them there;
 * `originUrl` becomes that repository's origin.
 * Throws UnverifiableError when head or base is missing, was tampered with, or head does not descend from base.
 */
export function verifyCommits(
  workspace: string, scratch: string, base: string, head: string, branch: string, originUrl: string | null = null,
): VerifiedCommits {
  if (!SHA.test(base) || !SHA.test(head)) throw new UnverifiableError('The run reported no head commit');
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true, mode: 0o700 });
  const borrowPath = join(scratch, 'borrow.git');
  const borrow = bare(borrowPath);
  writeFileSync(join(borrowPath, 'objects', 'info', 'alternates'), `${objectsDirOf(workspace)}\n`);
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
  const clean = bare(repo);
  try {
    clean(['-c', 'transfer.fsckObjects=true', '-c', 'protocol.file.allow=always', 'fetch', '--quiet', '--no-tags',
      '--update-shallow', `file://${borrowPath}`, `refs/svc/head:refs/heads/${branch}`,
      'refs/svc/base:refs/svc/base']);
  } catch (err) {
    throw new UnverifiableError(`The run's commits did not pass the hash check: ${(err as Error).message}`);
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
  return { repo, diff: diffCommits(repo, base, head) };
}

/** `.svc/policy.json` as the base commit holds it (the checks the agent could not choose); defaults when absent. */
export function policyAt(repo: string, base: string): Policy {
  let text: string;
  try {
    text = git(repo, ['cat-file', 'blob', `${base}:.svc/policy.json`], { GIT_DIR: repo });
  } catch {
    return DEFAULT_POLICY;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new PolicyError('policy.json at the base commit is not valid JSON');
  }
  return parsePolicy(raw);
}
