// Which directory a job runs in: the routed repository's checkout, or for a clone URL the job's own
// checkout of the freshly fetched mirror (managed-checkout.ts). Never another repository's, never the server's cwd.
import { FailedError } from '../errors.ts';
import type { JobRow } from '../db/trigger-jobs-store.ts';
import type { RepoRouter } from './served-repos.ts';
import type { ServedRepo } from './served-repos-file.ts';
import { ManagedGitError, type ManagedCheckouts } from './managed-checkout.ts';

/** The job cannot run: its repository is gone from the table, or its checkout could not be made. */
export class WorkdirError extends FailedError {
  constructor(message: string) {
    super(message);
  }
}

export interface JobWorkdirs {
  /** The served entry of a job: its recorded repository, or the default for a job accepted before migration 6. */
  repoOf(job: JobRow): ServedRepo;
  /** The directory to launch the job in; throws WorkdirError. */
  prepare(job: JobRow, repo: ServedRepo): Promise<string>;
  /** Where a running job's runs live after a restart: the recorded workdir, else its repository's checkout. */
  recorded(job: JobRow): string | null;
}

/** `managed` makes the checkouts of clone= entries; without it (tests of routing alone) such a job fails. */
export function createJobWorkdirs(router: RepoRouter, managed?: ManagedCheckouts): JobWorkdirs {
  function repoOf(job: JobRow): ServedRepo {
    const repo = job.repo === null ? router.entries.find((e) => e.isDefault) : router.byName(job.repo);
    if (!repo) {
      const what = job.repo === null
        ? 'it was queued before routing and no repository is the default'
        : `"${job.repo}" is no longer served`;
      throw new WorkdirError(`The job has no repository to run in: ${what}`);
    }
    return repo;
  }
  return {
    repoOf,
    async prepare(job, repo) {
      if (repo.checkout !== null) return repo.checkout;
      if (!managed) throw new WorkdirError(`"${repo.name}" has a clone URL, and no managed checkouts are made here`);
      try {
        return await managed.prepare(repo, job);
      } catch (err) {
        // git's reason, as the job's error and in its summary; the next job of the repository fetches again.
        if (err instanceof ManagedGitError) throw new WorkdirError(err.message);
        throw err;
      }
    },
    recorded(job) {
      if (job.workdir !== null) return job.workdir;
      try {
        return repoOf(job).checkout;
      } catch {
        return null;
      }
    },
  };
}
