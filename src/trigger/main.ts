// Boots the trigger server: the only place that listens and installs signal handlers. Shutdown leaves queued
// jobs queued and running jobs re-attachable; restart re-runs the queue (DESIGN §5).
import { beforeServing, busyMet, openDatabase } from '../db/open.ts';
import { triggerMigrations } from '../db/trigger-migrations.ts';
import { createTriggerStores } from '../db/trigger-stores.ts';
import { createJobQueue } from './queue.ts';
import { createJobLoop } from './job-loop.ts';
import { createKubernetesExecutor } from './kubernetes-executor.ts';
import { createNotifier } from './notify.ts';
import { createHttpsPoster, type Poster } from './https-post.ts';
import { createControlReporter, reportServedRepos } from './control-report.ts';
import { createTriggerApp, REPLIES } from './app.ts';
import { createLocalExecutor, type JobExecutor } from './executor.ts';
import type { TriggerSettings } from './settings.ts';
import { SOURCE_NAMES } from '../webhook-sources.ts';
import { createLogger, type Logger } from '../log.ts';
import { createSkipCounts } from './deps.ts';
import { createTriggerMetrics } from './metrics.ts';
import { createAnswerDesk } from './answers.ts';
import { createManagedCheckouts } from './managed-checkout.ts';
import { startTriggerRetention } from './retention.ts';
import { createWalCheckpointer } from '../db/wal-checkpointer.ts';
import { createGithubApi, type GithubApi } from './github-api.ts';
import { Tracer, traceSettings } from '../trace.ts';
import {
  closeGracefully, closeOnce, listen, createHttpServer, readConnectionLimits, exitCodeAfterSignal,
} from '../http/http-server.ts';

export type RunningTrigger = Awaited<ReturnType<typeof startTrigger>>;

/** Seams for tests. */
export interface TriggerOverrides {
  log?: Logger;
  executor?: JobExecutor;
  post?: Poster;
  clock?: () => number;
  pollMs?: number;
  bodyTimeoutMs?: number;
  notifyBackoffMs?: number;
  servedRetryMs?: readonly number[];
  github?: GithubApi;
  busyTries?: number;
}

function pickExecutor(settings: TriggerSettings, env: NodeJS.ProcessEnv, log: Logger, pollMs?: number): JobExecutor {
  const poll = pollMs ? { pollMs } : {};
  const { controlUrl, controlToken } = settings;
  // A token from SVC_CONTROL_TOKEN_FILE (a systemd credential) reaches the runs as SVC_CONTROL_TOKEN does: by the
  // launcher's secrets pipe, never its environment.
  const launchEnv = controlToken ? { ...env, SVC_CONTROL_TOKEN: controlToken } : env;
  const local = createLocalExecutor({ cliPath: settings.cliPath, env: launchEnv, log, ...poll });
  if (settings.executor === 'local') return local;
  // A pod's run is answered as a person would: `svc answer` finds no such run here and goes through the Control Plane.
  return { ...createKubernetesExecutor({ env, log, controlUrl, controlToken, ...poll }), answer: local.answer };
}

export async function startTrigger(settings: TriggerSettings, env: NodeJS.ProcessEnv, o: TriggerOverrides = {}) {
  const log = o.log ?? createLogger('trigger');
  // Read before anything opens: a bad SVC_TRIGGER_MAX_CONNECTIONS* fails the start with nothing to undo.
  const connectionLimits = readConnectionLimits(env, 'trigger');
  const clock = o.clock ?? Date.now;
  const executor = o.executor ?? pickExecutor(settings, env, log, o.pollMs);
  const db = openDatabase(settings.dbPath, triggerMigrations);
  const stores = createTriggerStores(db);
  // Nothing is served yet: a lock another process holds is waited for as migrations wait, not failed in 100 ms.
  beforeServing(db, () => stores.jobs.countOrigins(SOURCE_NAMES));
  const checkpointer = createWalCheckpointer({ db, path: settings.dbPath, log });
  const shutdown = new AbortController();
  const { controlUrl, controlToken, source } = settings;
  const control = { controlUrl, controlToken, source, log };
  const post = o.post ?? createHttpsPoster();
  const notify = createNotifier({
    stores, config: settings.notify, replies: REPLIES, post, report: createControlReporter(control), log, clock,
    signal: shutdown.signal, publicUrl: settings.publicUrl,
    ...(o.notifyBackoffMs !== undefined ? { backoffMs: o.notifyBackoffMs } : {}),
  });
  const { stateDir, checkoutsDir } = settings;
  const managed = createManagedCheckouts({ stateDir, checkoutsDir, env, log });
  const tracer = new Tracer(traceSettings(env, 'svc-trigger'));
  const jobLoop = createJobLoop({ stores, tracer, executor, settings, managed, clock, log, notify });
  const queue = createJobQueue({
    stores, clock, maxQueued: settings.queueMax, ...(o.busyTries !== undefined ? { busyTries: o.busyTries } : {}),
    // The queue's shares are split between the routes that can queue work.
    routes: SOURCE_NAMES.filter((r) => settings.secrets[r].unavailable === null).length,
    onEnqueued: () => {
      checkpointer.nudge();
      setImmediate(() => jobLoop.kick());
    },
  });
  const skips = createSkipCounts();
  let accepting = false;
  const github = o.github ?? createGithubApi(settings.notify.github);
  const metrics = createTriggerMetrics(stores, settings.repos, settings.dbPath, clock);
  const answers = createAnswerDesk({ stores, executor, clock, log, progress: notify.progress, note: notify.note,
    writeStamps: notify.writeStamps,
  });
  const deps = {
    settings, queue, clock, log, skips, accepting: () => accepting, github, pulls: stores.jobs, metrics, answers, post,
    tracer, busyMet: () => busyMet(db),
  };
  const listener = createTriggerApp(deps, o.bodyTimeoutMs);
  // The Control Plane's GET /v1/repos lists what is served here; a reloaded table's report stops the old one's retries.
  const reports: Array<Promise<void>> = [];
  let lastReport: AbortController | undefined;
  const report = (names: string[]): void => {
    lastReport?.abort();
    lastReport = new AbortController();
    reports.push(reportServedRepos(names, {
      ...control, signal: AbortSignal.any([shutdown.signal, lastReport.signal]),
      ...(o.servedRetryMs ? { retryMs: o.servedRetryMs } : {}),
    }));
  };
  settings.repos.attach?.({ log, onChange: (next) => report(next.entries.map((e) => e.name)) });
  const { server, connections } = createHttpServer(listener, connectionLimits);
  const { url } = await listen(server, settings.host, settings.port);
  accepting = true;
  // Logged once listening: a start that fails shows its own error last.
  for (const error of settings.problems.errors) log.error(error);
  for (const warning of settings.problems.warnings) log.warn(warning);
  jobLoop.recover();
  report(settings.repos.entries.map((e) => e.name));
  const stopRetention = startTriggerRetention({ stores, retention: settings.retention, clock, log });

  const close = closeOnce(async () => {
    accepting = false;
    stopRetention();
    await closeGracefully(server, async () => {
      shutdown.abort();
      await jobLoop.close();
      await Promise.all([...reports, managed.idle()]);
    });
    queue.close();
    await checkpointer.close();
    db.close();
    await tracer.flush();
  });
  return { url, server, connections, stores, queue, jobLoop, close };
}

/** Serves until SIGINT/SIGTERM, then shuts down once and resolves with the exit code. */
export async function serveTriggerForever(
  settings: TriggerSettings, env: NodeJS.ProcessEnv, print: (line: string) => void,
): Promise<number> {
  const log = createLogger('trigger');
  const running = await startTrigger(settings, env, { log });
  // Handlers before the URL is printed: whoever sees it may signal at once.
  const exited = exitCodeAfterSignal(log, 'shutting down; queued jobs stay queued', () => running.close());
  print(`${running.url}\n`);
  const repos = settings.repos.entries.map((e) => e.name);
  log.info('listening', {
    url: running.url, repos, repos_from: settings.repos.source, db: settings.dbPath, concurrency: settings.concurrency,
    repo_concurrency: settings.repoConcurrency,
  });
  return exited;
}
