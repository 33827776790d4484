// Checkouts svc manages for a `clone=URL` repository. Per repository, under the trigger's state
// folder (repo-dirs.ts): `mirror.git`, a bare repository that only svc writes, fetched from the origin before every
// job; and `jobs/<job id>/`, each job's own clone of it at the freshly fetched default branch, whose origin is the
// clone URL. The job's `svc start` runs there: its policy and config are the base commit's files, never the server's
// working directory, and its run's push goes to that origin by the push's own rules.
// Fetches of one repository wait for each other (one promise chain per repository), so concurrent jobs never write
// the mirror at once; different repositories fetch in parallel. A failed fetch fails that job with git's reason and
// leaves the mirror as it was; the next job fetches again.
// Must not: touch another repository's folder, reuse a job's checkout for another job, or let the token out
// (managed-git.ts).
import { copyFileSync, existsSync, mkdirSync, renameSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../log.ts';
import { managedDir } from './repo-dirs.ts';
import type { ServedRepo } from './served-repos-file.ts';
import { trackeraInbox, TRACKERA_IDENTIFIER } from './trackera-snapshot.ts';
import { createManagedGit, ManagedGitError, shownUrl, type ManagedGit } from './managed-git.ts';

export { ManagedGitError } from './managed-git.ts';

export interface ManagedCheckouts {
  /** Fetches the repository's mirror and makes `jobId`'s own checkout of its default branch; its path. */
  prepare(repo: ServedRepo, job: { id: string; args: readonly string[] }): Promise<string>;
}

export interface ManagedCheckoutOptions {
  stateDir: string;
  /**
   * Where each job's checkout goes: outside svc's home (~/.svc), which no agent sandbox shows, so the agent can see
   * its repository's git metadata. The mirror stays in the state folder, out of every agent's reach.
   */
  checkoutsDir: string;
  env: NodeJS.ProcessEnv;
  log: Logger;
  /** Default 15 minutes: a first clone of a large repository takes a while. */
  networkTimeoutMs?: number;
}

const JOB_SEGMENT = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export function mirrorDir(stateDir: string, repo: ServedRepo): string {
  return join(managedDir(stateDir, repo), 'mirror.git');
}

export function jobCheckoutDir(checkoutsDir: string, repo: ServedRepo, jobId: string): string {
  if (!JOB_SEGMENT.test(jobId)) throw new RangeError('bad job id');
  const [owner, name] = repo.name.toLowerCase().split('/') as [string, string];
  return join(checkoutsDir, owner, name, jobId);
}

/** The remote's default branch from `git ls-remote --symref URL HEAD`, or null. */
export function defaultBranchOf(lsRemote: string): string | null {
  const name = /^ref: refs\/heads\/(\S+)\tHEAD$/m.exec(lsRemote)?.[1];
  return name && !name.startsWith('-') ? name : null;
}

export function createManagedCheckouts(opts: ManagedCheckoutOptions): ManagedCheckouts {
  const git: ManagedGit = createManagedGit({ env: opts.env, networkTimeoutMs: opts.networkTimeoutMs ?? 15 * 60_000 });
  const chains = new Map<string, Promise<unknown>>();

  /** Runs `work` after every earlier one for the same repository has settled. */
  function serialized<T>(key: string, work: () => Promise<T>): Promise<T> {
    const next = (chains.get(key) ?? Promise.resolve()).then(work, work);
    const settled = next.catch(() => undefined);
    chains.set(key, settled);
    void settled.then(() => {
      if (chains.get(key) === settled) chains.delete(key);
    });
    return next;
  }

  /** Brings the mirror up to date; the default branch's name and commit. */
  async function fetchMirror(repo: ServedRepo, url: string): Promise<{ branch: string; sha: string }> {
    const mirror = mirrorDir(opts.stateDir, repo);
    if (!existsSync(join(mirror, 'HEAD'))) {
      mkdirSync(mirror, { recursive: true, mode: 0o700 });
      await git.local(mirror, ['init', '--quiet', '--bare'], 'Could not make the mirror');
    }
    const where = `${repo.name} from ${shownUrl(url)}`;
    const head = await git.remote(mirror, url, ['ls-remote', '--symref', url, 'HEAD'], `Could not reach ${where}`);
    const branch = defaultBranchOf(head);
    if (!branch) throw new ManagedGitError(`Could not fetch ${where}: the origin names no default branch (empty?)`);
    const refspec = '+refs/heads/*:refs/heads/*';
    await git.remote(mirror, url, ['fetch', '--quiet', '--prune', '--no-tags', '--no-write-fetch-head', url, refspec],
      `Could not fetch ${where}`);
    await git.local(mirror, ['symbolic-ref', 'HEAD', `refs/heads/${branch}`], 'Could not update the mirror');
    const sha = (await git.local(mirror, ['rev-parse', '--verify', `refs/heads/${branch}^{commit}`],
      `Could not fetch ${where}: no branch ${branch} after the fetch`)).trim();
    return { branch, sha };
  }

  /** The job's own clone of the mirror at `sha` on `branch`, whose origin is the clone URL. */
  async function makeCheckout(repo: ServedRepo, url: string, dir: string, branch: string, sha: string) {
    await rm(dir, { recursive: true, force: true }); // a launch that never happened left it (the job is new)
    mkdirSync(join(dir, '..'), { recursive: true, mode: 0o700 });
    const mirror = mirrorDir(opts.stateDir, repo);
    // --local hardlinks the objects (no copy, no network); only svc's git ever writes a mirror object (they are
    // never rewritten in place), and an agent sees the checkout's git folder read-only.
    await git.local(join(dir, '..'), ['clone', '--quiet', '--local', '--branch', branch, '--', mirror, dir],
      'Could not make the job checkout');
    await git.local(dir, ['config', 'remote.origin.url', url], 'Could not make the job checkout');
    const head = (await git.local(dir, ['rev-parse', 'HEAD'], 'Could not make the job checkout')).trim();
    if (head !== sha) throw new ManagedGitError(`The job checkout is at ${head}, not the fetched ${sha}`);
  }

  /** A trackera delivery's snapshot was staged in the repository's intake folder: the job's run reads it here. */
  function handOverIntake(repo: ServedRepo, dir: string, job: { id: string; args: readonly string[] }): void {
    const from = trackeraInbox(managedDir(opts.stateDir, repo));
    const to = trackeraInbox(dir);
    const own = join(from, 'jobs', `${job.id}.json`);
    const ref = job.args.find((a) => a.startsWith('trackera:'))?.slice('trackera:'.length);
    const latest = ref && TRACKERA_IDENTIFIER.test(ref) ? join(from, `${ref}.json`) : null;
    if (!existsSync(own) && !(latest && existsSync(latest))) return;
    mkdirSync(join(to, 'jobs'), { recursive: true, mode: 0o700 });
    if (existsSync(own)) renameSync(own, join(to, 'jobs', `${job.id}.json`));
    if (latest && existsSync(latest)) copyFileSync(latest, join(to, `${ref}.json`));
  }

  return {
    async prepare(repo, job) {
      const url = repo.clone;
      if (url === null) throw new RangeError(`${repo.name} is not a managed repository`);
      const dir = jobCheckoutDir(opts.checkoutsDir, repo, job.id);
      const started = Date.now();
      try {
        // The checkout is made inside the turn too: the mirror's branch is still the commit just fetched.
        const { branch, sha } = await serialized(repo.name.toLowerCase(), async () => {
          const fetched = await fetchMirror(repo, url);
          await makeCheckout(repo, url, dir, fetched.branch, fetched.sha);
          return fetched;
        });
        handOverIntake(repo, dir, job);
        const ms = Date.now() - started;
        opts.log.info('managed checkout ready', { job_id: job.id, repo: repo.name, branch, sha, ms });
        return dir;
      } catch (err) {
        await rm(dir, { recursive: true, force: true });
        if (err instanceof ManagedGitError) {
          opts.log.warn('managed checkout failed', { job_id: job.id, repo: repo.name, error: err.message });
        }
        throw err;
      }
    },
  };
}
