// Runs queued jobs with a concurrency limit: launch `svc start … --detach`, follow the run to its end, then notify.
// A job ends when its run ends (DESIGN §5); shutdown leaves queued jobs queued and running jobs re-attachable.
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { JobRow } from '../db/trigger-jobs-store.ts';
import type { JobExecutor } from './executor.ts';
import { UNLAUNCHED, type FollowOptions, type RunOutcome } from './run-follow.ts';
import type { RunRef } from '../client/types.ts';
import { buildSummaryParts, plainSummary } from './summary.ts';
import type { createNotifier } from './notify.ts';
import type { Logger } from '../log.ts';
import type { TriggerSettings } from './settings.ts';
import type { ServedRepo } from './served-repos-file.ts';
import { ManagedGitError, type ManagedCheckouts } from './managed-checkout.ts';
import { countActive, markServed, pickNext, type Turns } from './dispatch-order.ts';
import { errorMessage } from '../errors.ts';
import type { Tracer } from '../trace.ts';
import { endJobSpan, launchTraceparent } from './job-trace.ts';
import { refusedForNow, untilWritten } from '../db/open.ts';
import { newRunId } from '../engine/ids.ts';
import type { ProcIdentity } from '../proc-stat.ts';

/** How soon a write the database refused (another process holds its lock, the disk is full) is tried again. */
const RETRY_MS = 1_000;
/** How often a job's end that the database keeps refusing is logged (a failed disk may refuse it for good). */
const RETRY_LOG_MS = 60_000;
/** How often a job whose lost launch made no run is queued again; the next such launch ends it interrupted. */
const MAX_REQUEUES = 3;

interface JobEnd {
  status: 'succeeded' | 'failed' | 'interrupted';
  run?: RunRef | null;
  outcome?: RunOutcome | null;
  exitCode?: number | null;
  error: string | null;
}

interface JobLoopOptions {
  stores: TriggerStores;
  executor: JobExecutor;
  /** `publicUrl`: the run link in summaries (none without it: never a loopback link). */
  settings: Pick<TriggerSettings, 'concurrency' | 'repoConcurrency' | 'repos' | 'publicUrl'>;
  managed: ManagedCheckouts;
  clock: () => number;
  log: Logger;
  tracer: Tracer;
  /** Sends a job's summary, and with `progress` what its run is doing; never throws. */
  notify: ReturnType<typeof createNotifier>;
}

export function createJobLoop(opts: JobLoopOptions) {
  const { stores, executor, log, settings } = opts;
  const abort = new AbortController();
  const tasks = new Set<Promise<void>>();
  /** Summaries still being sent: awaited by `idle` and `close`, but holding no job slot. */
  const sending = new Set<Promise<void>>();
  /** Jobs whose summary waits its turn: at most `concurrency` go at once (a burst to a vendor answering 429). */
  const waiting: string[] = [];
  let closed = false;

  const turns: Turns = { active: new Map(), served: new Map(), starts: 0 };
  let retryKick: NodeJS.Timeout | undefined;
  /** A recovery not yet through every running job, and the jobs it has dealt with. */
  let recovering = false;
  const recovered = new Set<string>();

  /** A job that throws ends failed; its slot frees either way and the next job may start. */
  function track(job: JobRow, work: Promise<void>): void {
    const task = work.catch(async (err: unknown) => {
      log.error('job crashed', { job_id: job.id, error: errorMessage(err) });
      await record(job, { status: 'failed', error: 'internal error while running the job' }).catch((again) => {
        log.error('could not record the job\'s end', { job_id: job.id, error: errorMessage(again) });
      });
    });
    tasks.add(task);
    countActive(turns, job, 1);
    void task.finally(() => {
      tasks.delete(task);
      countActive(turns, job, -1);
      if (!closed) kick();
    });
  }

  function finish(job: JobRow, end: JobEnd): void {
    const { status, run = null, outcome = null, exitCode = null, error } = end;
    const now = opts.clock();
    const startedMs = outcome?.started_at ? Date.parse(outcome.started_at) : (job.started_at ?? now);
    const endedMs = outcome?.ended_at ? Date.parse(outcome.ended_at) : now;
    const parts = buildSummaryParts({
      jobId: job.id, status, run, outcome, durationMs: endedMs - startedMs, error, publicUrl: settings.publicUrl,
    });
    const summary = plainSummary(parts);
    // The worker's own retries of the run (never the job's), shown in the job's JSON.
    if (outcome?.infra_retries) stores.jobs.setInfraRetries(job.id, outcome.infra_retries);
    stores.jobs.finish(job.id, {
      status, finished_at: now, exit_code: exitCode, summary, summary_parts: JSON.stringify(parts), error,
    });
    endJobSpan(opts.tracer, job, status, now, run?.run ?? null);
    if (run) {
      log.info('job finished', { job_id: job.id, status, run: `${run.source}/${run.run}` });
      return;
    }
    // No run to look up (no repository, a failed fetch or launch): the log says why, as the job's JSON does; an
    // errtrack or /jobs job sends its summary nowhere.
    log.warn('job finished', { job_id: job.id, status, run: null, error });
  }

  /**
   * Records `what` of the job (`write`); a write the database refuses (busy, a full disk) is tried again each second
   * while the job keeps its slot. False on shutdown: the job stays running, re-attached or interrupted on restart.
   */
  function untilRecorded(job: JobRow, what: string, write: () => void): Promise<boolean> {
    let logged = -Infinity;
    return untilWritten(stores.db, write, abort.signal, (err) => {
      if (Date.now() - logged < RETRY_LOG_MS) return;
      logged = Date.now();
      log.error(`could not record ${what}; trying again`, { job_id: job.id, error: errorMessage(err) });
    });
  }

  function record(job: JobRow, end: JobEnd): Promise<boolean> {
    return untilRecorded(job, 'the job\'s end', () => finish(job, end));
  }

  async function finishAndNotify(job: JobRow, end: JobEnd): Promise<void> {
    if (await record(job, end)) sendSummary(job.id);
  }

  /**
   * The job's slot frees before its summary goes: a vendor's Retry-After may hold a send for minutes. A summary
   * not sent by shutdown stays pending and is sent on the next start (`recover`).
   */
  function sendSummary(jobId: string): void {
    waiting.push(jobId);
    sendWaiting();
  }

  function sendWaiting(): void {
    while (sending.size < settings.concurrency && waiting.length > 0) {
      const sent = opts.notify(waiting.shift()!);
      sending.add(sent);
      void sent.finally(() => {
        sending.delete(sent);
        sendWaiting();
      });
    }
  }

  /** `launching`: re-attached to the run a launch the server did not see end was given (FollowOptions). */
  async function followToEnd(
    job: JobRow, run: RunRef, reattach: boolean, workdir: string, launching?: FollowOptions['launching'],
  ): Promise<void> {
    // A launch the server lost never told its run's start (runJob does, after the launch): told once its run is seen.
    let untold = launching !== undefined;
    // The answer comes back through the job's route (answers.ts).
    const onQuestion = (question: string | null): void => {
      if (untold) void opts.notify.progress(job.id, { step: 'started' });
      untold = false;
      void opts.notify.progress(job.id, question !== null ? { step: 'waiting', question } : { step: 'resumed' });
    };
    const outcome = await executor.follow(run, abort.signal, { reattach, launching, workdir, onQuestion });
    if (outcome === 'aborted') return; // shutting down: stays running, re-attached on restart
    if (outcome === UNLAUNCHED) return requeue(job, run);
    if (outcome === null) {
      const error = launching ? 'the server stopped during the launch and found no run after its restart'
        : reattach ? 'run state not found after restart' : 'run state never appeared';
      return finishAndNotify(job, { status: reattach ? 'interrupted' : 'failed', run, error });
    }
    const error = outcome.status === 'stopped' ? 'run stopped'
      : outcome.status === 'failed' ? (outcome.error ?? 'run failed')
      : null;
    const status = outcome.status === 'succeeded' ? 'succeeded' : 'failed';
    await finishAndNotify(job, { status, run, outcome, error });
  }

  /**
   * A lost launch that made no run, so reached no agent (run-follow.ts UNLAUNCHED): the same job, its dedupe keys and
   * reply target kept, is queued again with a new run id, and its row and log say why. MAX_REQUEUES times at most: the
   * next such launch (a launch that takes the server down each time) ends it `interrupted`.
   */
  async function requeue(job: JobRow, run: RunRef): Promise<void> {
    const made = `${run.source}/${run.run}`;
    if (job.requeues >= MAX_REQUEUES) {
      const error = `the server stopped during its launch ${job.requeues + 1} times; its run ${made} reached no agent`;
      return finishAndNotify(job, { status: 'interrupted', run, error });
    }
    const why = `queued again: the server stopped during its launch, whose run ${made} reached no agent`;
    if (!await untilRecorded(job, 'the job queued again', () => stores.jobs.requeue(job.id, why))) return;
    log.warn('job queued again: its launch, lost with the server, reached no agent', {
      job_id: job.id, run: made, requeues: job.requeues + 1,
    });
  }

  /** Without it a restart during the launch cannot end the launcher: it may make its run after the job is over. */
  function recordLauncher(job: JobRow, launcher: ProcIdentity | null): void {
    try {
      stores.jobs.setLauncher(job.id, launcher && JSON.stringify(launcher));
    } catch (err) {
      log.error('could not record the job\'s launcher', { job_id: job.id, error: errorMessage(err) });
    }
  }

  /** The job's served entry (a job queued before routing, migration 6, takes the default). */
  function repoOf(job: JobRow): ServedRepo | undefined {
    return job.repo === null ? settings.repos.entries.find((e) => e.isDefault) : settings.repos.byName(job.repo);
  }

  async function runJob(job: JobRow): Promise<void> {
    log.info('job started', { job_id: job.id, origin: job.origin, repo: job.repo });
    const repo = repoOf(job);
    if (!repo) {
      const error = job.repo === null
        ? 'The job has no repository to run in: it was queued before routing and no repository is the default'
        : `The job has no repository to run in: "${job.repo}" is no longer served`;
      return finishAndNotify(job, { status: 'failed', error });
    }
    // Its run's id, chosen here and recorded before the launcher may make it: a restart while it runs finds that run.
    const launchRun = newRunId();
    const launch = (workdir: string, word?: Promise<boolean>) => executor.launch({
      id: job.id, run: launchRun, args: job.args, origin: job.origin, workdir, word,
      repo: { name: repo.name, clone: repo.clone }, traceparent: launchTraceparent(job),
      onLauncher: (launcher) => recordLauncher(job, launcher),
    });
    // A managed job with a spare: its launcher starts in it while the origin is asked, held until its word.
    let held = null as { go: (ok: boolean) => void; launched: ReturnType<typeof launch>; withdraw: () => Promise<void> }
      | null;
    const early = (dir: string) => {
      const { promise: word, resolve: go } = Promise.withResolvers<boolean>();
      const launched = launch(dir, word);
      // A launch that throws during the hold (a spawn refused for memory) fails the job where it is awaited below
      // (track), never as an unhandled rejection that ends the server.
      launched.catch(() => {});
      const withdraw = async () => {
        held = null;
        go(false);
        await launched.catch(() => {});
        // Ended: a restart must not take its identity for a launcher that may still make a run.
        recordLauncher(job, null);
      };
      held = { go, launched, withdraw };
      return withdraw;
    };
    let workdir: string;
    try {
      workdir = repo.checkout ?? await opts.managed.prepare(repo, job, abort.signal, early);
    } catch (err) {
      // The server stops during a fetch: nothing was launched, so the job waits for the next start.
      if (abort.signal.aborted) {
        stores.jobs.unclaim(job.id);
        return;
      }
      // git's reason is the job's error; the repository's next job fetches again.
      if (!(err instanceof ManagedGitError)) throw err;
      return finishAndNotify(job, { status: 'failed', error: err.message });
    }
    // Not recorded by shutdown: nothing was launched, and the next start queues the job again (recover). A held
    // launcher is given its word only after this: one the server lost before reads no word and never starts.
    let recorded = false;
    try {
      recorded = await untilRecorded(job, 'the job\'s launch', () => stores.jobs.setLaunch(job.id, workdir, launchRun));
    } finally {
      if (!recorded) await held?.withdraw(); // stopping, or a write that threw: the held launcher is ended, not left
    }
    if (!recorded) return;
    held?.go(true);
    const launched = await (held?.launched ?? launch(workdir));
    if (!launched.run || launched.error) {
      const error = launched.error ?? 'launch failed';
      return finishAndNotify(job, { status: 'failed', exitCode: launched.exitCode, error });
    }
    // Its run is working: a job failed here for a full disk would leave that run unwatched.
    const { source, run } = launched.run;
    if (!await untilRecorded(job, 'the job\'s run', () => stores.jobs.setRun(job.id, source, run, launched.exitCode))) {
      return;
    }
    void opts.notify.progress(job.id, { step: 'started' });
    await followToEnd(job, launched.run, false, workdir);
  }

  /**
   * Finishes a recovery the database interrupted, then starts queued jobs into free slots; a database that refuses a
   * write is tried again in a second. Any other error is a bug, and thrown.
   */
  function kick(): void {
    if (closed) return;
    try {
      if (recovering) recoverRunning();
      startQueued();
    } catch (err) {
      if (!refusedForNow(stores.db, err)) throw err;
      log.error('could not recover or start jobs; trying again', { error: errorMessage(err) });
      retryKick ??= setTimeout(() => {
        retryKick = undefined;
        kick();
      }, RETRY_MS);
    }
  }

  function startQueued(): void {
    // A failed claim: another dispatcher took that job.
    for (let tries = 0; tasks.size < settings.concurrency && tries < settings.concurrency * 2; tries++) {
      const job = pickNext(stores.jobs, turns, settings.repoConcurrency);
      if (!job) return;
      if (!stores.jobs.claim(job.id, opts.clock())) continue;
      const claimed = { ...job, status: 'running' as const, started_at: opts.clock() };
      markServed(turns, job);
      track(claimed, runJob(claimed));
    }
  }

  /**
   * After a restart: re-attach running jobs to their runs, or to the run a launch in flight was given (marked
   * interrupted when there is none), and resend missed summaries; a database that refuses a write has the rest done
   * by the next kick.
   */
  function recover(): void {
    recovering = true;
    kick();
  }

  function recoverRunning(): void {
    for (const job of stores.jobs.listRunning()) {
      if (recovered.has(job.id)) continue;
      const workdir = job.workdir ?? repoOf(job)?.checkout ?? null;
      const launching = job.run_id === null && job.launch_run !== null;
      const run = launching ? { source: executor.source, run: job.launch_run! }
        : job.run_source && job.run_id ? { source: job.run_source, run: job.run_id } : null;
      if (run && workdir !== null) {
        // Written by this server (runJob), read before setRun drops it.
        const launcher = job.launcher === null ? null : JSON.parse(job.launcher) as ProcIdentity;
        // Now the job's run: an answer or a progress note finds it, and a second restart re-attaches to it.
        if (launching) stores.jobs.setRun(job.id, run.source, run.run, null);
        log.info('re-attaching job to its run', { job_id: job.id, run: `${run.source}/${run.run}`, launching });
        markServed(turns, job);
        track(job, followToEnd(job, run, true, workdir, launching ? { launcher } : undefined));
      } else if (job.workdir === null && stores.jobs.unclaim(job.id)) {
        // It died before its launch (during a managed checkout's fetch, say): nothing was started, so it runs again.
        log.info('job queued again: the server stopped before its launch', { job_id: job.id });
      } else {
        finish(job, { status: 'interrupted', error: 'the server stopped before the run was recorded' });
        sendSummary(job.id);
      }
      recovered.add(job.id);
    }
    recovering = false;
    recovered.clear();
    for (const jobId of stores.replies.listPending()) sendSummary(jobId);
  }

  return {
    kick,
    recover,
    /** Resolves once no job is active and no summary is being sent; a job that ends may start the next. */
    async idle() {
      while (tasks.size > 0 || sending.size > 0) await Promise.allSettled([...tasks, ...sending]);
    },
    /**
     * Stop taking jobs, let in-flight launches record their run, stop following; resolves when idle. Summaries
     * waiting their turn stay pending (sent on the next start); a job that ends meanwhile still sends its own.
     */
    async close() {
      closed = true;
      waiting.length = 0;
      clearTimeout(retryKick);
      abort.abort();
      while (tasks.size > 0 || sending.size > 0) await Promise.allSettled([...tasks, ...sending]);
    },
  };
}
