// Checkouts svc manages for a `clone=URL` repository: a bare mirror per repository, a clone of it per job (docs/
// trigger.md "Managed checkouts"). git runs asynchronously: a fetch must not hold the server's event loop. Must not:
// touch another repository's folder, reuse a job's checkout, or let the token out in argv, a URL, a file or an error.
import { constants, copyFileSync, existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../log.ts';
import type { ServedRepo } from './served-repos-file.ts';
import { runCollect } from '../spawn/start.ts';
import { errorMessage, FailedError } from '../errors.ts';
import { gitArgv, gitBaseEnv, gitExtraEnv, gitTimeoutMs, redirectedUrl } from '../engine/git.ts';
import { gitFailure, redirectRefusal, withGitToken } from '../engine/git-token.ts';
import { urlWithoutSecrets } from '../engine/text.ts';
import { inTurn } from './queue.ts';
import { makePlainDirIn, makePlainPath, UnsafePathError, withDir } from '../engine/safe-fs.ts';
import { pathIn } from '../engine/plain-tree.ts';
import { TRACKERA_INBOX } from '../engine/paths.ts';
import { jobMayFetchIssue } from './executor.ts';

export type ManagedCheckouts = ReturnType<typeof createManagedCheckouts>;

/** A job a checkout is made for: `origin` is who sent it, which decides what of svc's intake it is handed. */
interface CheckoutJob {
  id: string;
  origin: string;
  args: readonly string[];
}

/** A managed repository's mirror and intake files. */
export function managedDir(stateDir: string, repo: ServedRepo): string {
  const [owner, name] = repo.name.toLowerCase().split('/') as [string, string];
  return join(stateDir, 'repos', owner, name);
}

/** Whose `.svc/inbox` receives a delivery's trackera snapshot before its job's checkout exists. */
export function intakeDir(stateDir: string, repo: ServedRepo): string {
  return repo.checkout ?? managedDir(stateDir, repo);
}

/** A trackera issue identifier (ENG-123): a file name in the inbox. */
export const TRACKERA_IDENTIFIER = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

const JOB_SEGMENT = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

function mirrorDir(stateDir: string, repo: ServedRepo): string {
  return join(managedDir(stateDir, repo), 'mirror.git');
}

/** `git ls-remote --symref URL HEAD refs/heads/*`, and the default branch it names. */
type Asked = { listing: string; branch: string };

/** git's own reason (its first stderr line, redacted: git names a URL with what follows a password's `@`); never
 * holds the token. */
export class ManagedGitError extends FailedError {}

const OUTPUT_CAP = 4 * 1024 * 1024;

/** `local` git on svc's own mirror and checkouts; `remote` to `url`, the token only on its host. */
function createManagedGit(env: NodeJS.ProcessEnv) {
  const base = gitBaseEnv(env);
  async function run(
    cwd: string, argv: string[], extra: Record<string, string>, what: string,
    remote?: { url: string; signal?: AbortSignal | undefined },
  ): Promise<string> {
    const timeout = gitTimeoutMs(argv);
    const done = await runCollect(gitArgv(argv), {
      kind: 'tool', base, extra: gitExtraEnv(extra), cwd, maxBuffer: OUTPUT_CAP, timeout,
      ...(remote ? { signal: remote.signal } : {}),
    });
    if (done.status === 0) return done.stdout;
    remote?.signal?.throwIfAborted(); // the server stops: not the origin's failure, so not the job's
    if (remote !== undefined && redirectedUrl(done.stderr) !== null) {
      throw new ManagedGitError(`${what}: ${(await redirectRefusal(remote.url, 'git-upload-pack', env)).message}`);
    }
    throw new ManagedGitError(`${what}: ${gitFailure(done, timeout).slice(0, 300)}`);
  }

  const token = env.GITHUB_TOKEN || env.GH_TOKEN || null;
  return {
    local: (cwd: string, args: string[], what: string) => run(cwd, args, {}, what),
    remote: (cwd: string, url: string, args: string[], what: string, signal: AbortSignal | undefined) =>
      withGitToken(url, token, env, 'git-upload-pack',
        (config, extra) => run(cwd, [...config, ...args], extra, what, { url, signal })),
  };
}

export function createManagedCheckouts(opts: {
  stateDir: string;
  /** Outside ~/.svc, which no agent sandbox shows. */
  checkoutsDir: string;
  env: NodeJS.ProcessEnv;
  log: Logger;
}) {
  const git = createManagedGit(opts.env);
  const chains = new Map<string, Promise<unknown>>();
  /** Per repository, the origin's answer its spare checkout (`.next`) was made for. */
  const spares = new Map<string, { listing: string }>();
  /** Spares waiting for their index's second to pass (settleLater). */
  const settling = new Set<NodeJS.Timeout>();

  async function askOrigin(repo: ServedRepo, url: string, signal: AbortSignal | undefined): Promise<Asked> {
    const mirror = mirrorDir(opts.stateDir, repo);
    if (!existsSync(join(mirror, 'HEAD'))) {
      mkdirSync(mirror, { recursive: true, mode: 0o700 });
      await git.local(mirror, ['init', '--quiet', '--bare'], 'Could not make the mirror');
    }
    const where = `${repo.name} from ${urlWithoutSecrets(url)}`;
    const listing = await git.remote(mirror, url, ['ls-remote', '--symref', url, 'HEAD', 'refs/heads/*'],
      `Could not reach ${where}`, signal);
    const branch = /^ref: refs\/heads\/([^-\s]\S*)\tHEAD$/m.exec(listing)?.[1]; // never one git takes for an option
    if (!branch) throw new ManagedGitError(`Could not fetch ${where}: the origin names no default branch (empty?)`);
    return { listing, branch };
  }

  /** A clone of the mirror's `branch` whose origin is the clone URL; its commit. */
  async function makeCheckout(repo: ServedRepo, url: string, dir: string, branch: string): Promise<string> {
    // A spare that never finished left it, or a requeued job's lost launch (no run state: no worker uses it).
    await rm(dir, { recursive: true, force: true });
    mkdirSync(join(dir, '..'), { recursive: true, mode: 0o700 });
    // --local hardlinks the objects: only svc's git writes a mirror, and an agent sees the git folder read-only.
    await git.local(join(dir, '..'), ['clone', '--quiet', '--local', '--branch', branch, '--',
      mirrorDir(opts.stateDir, repo), dir], 'Could not make the job checkout');
    await git.local(dir, ['config', 'remote.origin.url', url], 'Could not make the job checkout');
    return (await git.local(dir, ['rev-parse', 'HEAD'], 'Could not make the job checkout')).trim();
  }

  /** The spare, renamed to `dir`, when one is ready; the answer it was made for. */
  async function takeSpare(key: string, dir: string, spare: string): Promise<{ listing: string } | null> {
    const made = spares.get(key);
    spares.delete(key);
    if (!made || !existsSync(spare)) return null;
    // A launch that never happened left it, or a requeued job's lost launch (no run state: no worker uses it).
    await rm(dir, { recursive: true, force: true });
    renameSync(spare, dir);
    return made;
  }

  /** The next job's checkout, kept only when it is the origin's commit. */
  async function makeSpare(repo: ServedRepo, url: string, spare: string, asked: Asked): Promise<void> {
    const key = repo.name.toLowerCase();
    if (spares.has(key)) return;
    try {
      const sha = await makeCheckout(repo, url, spare, asked.branch);
      if (!asked.listing.includes(`\n${sha}\tHEAD\n`)) return;
      const made = { listing: asked.listing };
      spares.set(key, made);
      settleLater(key, spare, made);
    } catch (err) {
      await rm(spare, { recursive: true, force: true });
      opts.log.warn('spare checkout failed', { repo: repo.name, error: errorMessage(err) });
    }
  }

  /** git trusts a file's recorded stat only when the index was written in a later second than the file ("racy
   * git"): a fresh clone writes its index in its last files' second, so the job's `svc start` (`git status`) would
   * hash those files again and rewrite the index on the job's way to its agent (a whole tree when the clone took
   * under a second: 5,000 files cost ~42 ms of CPU more, docs/bench.md). Once that second is over, the spare's
   * index is refreshed here instead; a job that comes first takes it as it is. `-q`: a file the repository's
   * attributes show as changed stays so, as for any clone; a refresh that fails (a lock left, say) drops the spare
   * rather than hand a job an index in doubt. */
  function settleLater(key: string, spare: string, made: { listing: string }): void {
    const index = statSync(join(spare, '.git', 'index'), { throwIfNoEntry: false });
    if (!index) return;
    // 20 ms past the second: a file's time comes from the kernel's coarse clock, which may lag Date.now().
    const wait = Math.max(0, (Math.floor(index.mtimeMs / 1000) + 1) * 1000 + 20 - Date.now());
    const timer = setTimeout(() => {
      settling.delete(timer);
      void inTurn(chains, key, async () => {
        if (spares.get(key) !== made) return; // taken, or made again
        try {
          await git.local(spare, ['update-index', '-q', '--refresh'], 'Could not refresh the spare checkout');
        } catch (err) {
          spares.delete(key);
          opts.log.warn('spare checkout failed', { repo: key, error: errorMessage(err) });
        }
      });
    }, wait);
    timer.unref();
    settling.add(timer);
  }

  /** Moves the job's snapshot (and copies the issue's newest) from svc's intake folder into the checkout, whose
   * `.svc/inbox` the repository may have committed as links: nothing there is followed (stageTrackeraSnapshot). The
   * newest is another delivery's text: only a job whose origin may read that issue gets it (DESIGN §7a, every sender
   * acts with its own authority), never a chat message's that names `trackera:<id>` of a team it may not see. */
  function handOverIntake(repo: ServedRepo, dir: string, job: CheckoutJob): void {
    const from = join(managedDir(opts.stateDir, repo), ...TRACKERA_INBOX);
    const own = join(from, 'jobs', `${job.id}.json`);
    const ref = jobMayFetchIssue('trackera', job)
      ? job.args.find((a) => a.startsWith('trackera:'))?.slice('trackera:'.length) : undefined;
    const latest = ref && TRACKERA_IDENTIFIER.test(ref) ? join(from, `${ref}.json`) : null;
    if (!existsSync(own) && !(latest && existsSync(latest))) return;
    try {
      withDir(makePlainPath(dir, TRACKERA_INBOX), (to) => {
        if (existsSync(own)) {
          withDir(makePlainDirIn(to, 'jobs'), (jobs) => renameSync(own, pathIn(jobs, `${job.id}.json`)));
        }
        if (latest && existsSync(latest)) {
          const tmp = pathIn(to, `.${randomUUID()}.tmp`);
          copyFileSync(latest, tmp, constants.COPYFILE_EXCL);
          renameSync(tmp, pathIn(to, `${ref}.json`));
        }
      });
    } catch (err) {
      // The repository's layout (a link or non-folder at .svc/inbox, trackera or jobs), as for a checkout= repository's
      // delivery (trackera.ts): the job runs without its snapshot, and its own file is not left behind.
      if (!(err instanceof UnsafePathError)) throw err;
      opts.log.warn('trackera snapshot not staged', { job_id: job.id, repo: repo.name, error: err.message });
      rmSync(own, { force: true });
    }
  }

  return {
    /** Resolves once no fetch or checkout (spares included) is under way; a spare's refresh still to come is
     * dropped (the server stops, and a restarted one never uses the spare). */
    idle: async () => {
      // Timers are dropped after the chains drain: a spare finished meanwhile sets its timer as it ends.
      while (chains.size > 0) await Promise.all(chains.values());
      for (const timer of settling) clearTimeout(timer);
      settling.clear();
    },
    /**
     * `signal`: the server stops; git talking to the origin is killed and prepare rejects with its reason. `early`:
     * told the job's folder once a spare is in it, before the origin's answer; it starts the job's launch there, held
     * until its word, and gives a withdraw that ends it, awaited before anything is written there again (on a
     * different answer, a failure or a stop: the launch that resolves stands).
     */
    async prepare(
      repo: ServedRepo, job: CheckoutJob, signal?: AbortSignal,
      early?: (dir: string) => () => Promise<void>,
    ): Promise<string> {
      const url = repo.clone;
      if (url === null) throw new RangeError(`${repo.name} is not a managed repository`);
      if (!JOB_SEGMENT.test(job.id)) throw new RangeError('bad job id');
      const dir = join(opts.checkoutsDir, ...repo.name.toLowerCase().split('/'), job.id);
      const spare = join(dir, '..', '.next'); // no job id starts with a dot
      const started = Date.now();
      const key = repo.name.toLowerCase();
      let withdraw = null as (() => Promise<void>) | null;
      try {
        // The checkout is made inside the turn too: the mirror's branch is still the commit just fetched.
        const { branch, sha } = await inTurn(chains, key, async () => {
          signal?.throwIfAborted(); // a job that waited its turn behind a fetch the stop killed
          // With a spare, `early` starts the job's launch in it while the origin is asked (it waits for its word).
          const taken = early ? await takeSpare(key, dir, spare) : null;
          if (taken !== null) withdraw = early!(dir);
          const asked = await askOrigin(repo, url, signal).catch(async (err: unknown) => {
            // No answer: the spare, unread by its ended launch, is kept for the next job (else a full clone).
            if (taken !== null) {
              await withdraw?.();
              withdraw = null;
              renameSync(dir, spare);
              spares.set(key, taken);
            }
            throw err;
          });
          const ready = taken ?? (spares.get(key)?.listing === asked.listing ? await takeSpare(key, dir, spare) : null);
          let sha: string;
          if (ready?.listing === asked.listing) {
            sha = /^([0-9a-f]+)\tHEAD$/m.exec(asked.listing)![1]!;
          } else {
            // The origin moved since the spare: its launch, which saw nothing yet, ends before its folder is replaced.
            await withdraw?.();
            withdraw = null;
            spares.delete(key);
            const fetch = ['fetch', '--quiet', '--prune', '--no-tags', '--no-write-fetch-head',
              url, '+refs/heads/*:refs/heads/*'];
            const what = `Could not fetch ${repo.name} from ${urlWithoutSecrets(url)}`;
            await git.remote(mirrorDir(opts.stateDir, repo), url, fetch, what, signal);
            sha = await makeCheckout(repo, url, dir, asked.branch);
          }
          void inTurn(chains, key, () => makeSpare(repo, url, spare, asked));
          return { branch: asked.branch, sha };
        });
        signal?.throwIfAborted(); // the job stays queued, and its snapshot in the intake folder for its next try
        handOverIntake(repo, dir, job);
        const ms = Date.now() - started;
        opts.log.info('managed checkout ready', { job_id: job.id, repo: repo.name, branch, sha, ms });
        return dir;
      } catch (err) {
        await withdraw?.();
        await rm(dir, { recursive: true, force: true });
        if (err instanceof ManagedGitError) {
          opts.log.warn('managed checkout failed', { job_id: job.id, repo: repo.name, error: err.message });
        }
        throw err;
      }
    },
  };
}
