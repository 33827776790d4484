// Boots the Control Plane: the only place that listens, writes server.json and installs signal handlers; it starts the
// hourly retention sweeps of `retention_days` and SVC_CONTROL_AUDIT_RETENTION_DAYS, in small batches so a large
// backlog never holds the write lock for long (docs/control-config.md).
import { mkdirSync, rmSync } from 'node:fs';
import { writeJsonAtomic } from '../engine/safe-fs.ts';
import { dirname } from 'node:path';
import {
  answersHealth, readServerRecordFile, serverRecordFile, type ServerRecord,
} from '../client/server-record.ts';
import { procStart } from '../proc-stat.ts';
import { isLiveRecord } from '../engine/control-url.ts';
import { openDatabase, transaction } from '../db/open.ts';
import { createWalCheckpointer } from '../db/wal-checkpointer.ts';
import { controlMigrations } from '../db/control-migrations.ts';
import { createControlStores } from '../db/control-stores.ts';
import { createRunEventBus } from './event-bus.ts';
import { createRunController } from './run-controller.ts';
import { LAUNCH_TIMEOUT_MS } from '../spawn/start.ts';
import { repoName, repoRoot } from '../engine/git.ts';
import { createControlApp } from './app.ts';
import { importActiveRuns } from './handlers/ingest.ts';
import { readEffectiveConfig } from './config-schema.ts';
import { createRefusalTally } from './refusal-tally.ts';
import { createExpensiveReads } from './expensive-reads.ts';
import { createControlMetrics } from './metrics.ts';
import { isLoopbackHost, LOOPBACK_HOSTS } from '../http/guards.ts';
import { closeGracefully, closeOnce, listen, createHttpServer, exitCodeAfterSignal } from '../http/http-server.ts';
import type { ControlSettings } from './settings.ts';
import type { ControlDeps } from './deps.ts';
import { createLogger, type Logger } from '../log.ts';
import { BadSettingError, errorMessage } from '../errors.ts';
import { DAY_MS, iso } from '../iso-time.ts';
import { failureColumns } from '../db/run-types.ts';
import { runFailure } from '../run-json.ts';

export type RunningControl = Awaited<ReturnType<typeof startControl>>;

/** Refuses a tokenless non-loopback bind (spec: exit code 2) unless explicitly overridden. */
function checkBindPolicy(settings: ControlSettings, log: Logger): void {
  if (isLoopbackHost(settings.host) || settings.token) return;
  if (!settings.allowInsecureBind) {
    throw new BadSettingError(
      `Refusing to bind ${settings.host} without SVC_CONTROL_TOKEN: ` +
        'anyone who can reach it could read and steer runs. ' +
        'Set SVC_CONTROL_TOKEN, bind 127.0.0.1, or set SVC_CONTROL_ALLOW_INSECURE_BIND=1',
    );
  }
  log.warn('INSECURE: serving the Control Plane on a non-loopback address with no token ' +
    '(SVC_CONTROL_ALLOW_INSECURE_BIND=1)', { host: settings.host });
}

export async function startControl(
  settings: ControlSettings, env: NodeJS.ProcessEnv, log: Logger = createLogger('control'),
) {
  checkBindPolicy(settings, log);
  const db = openDatabase(settings.dbPath, controlMigrations);
  let url = '';
  const boundToLoopback = isLoopbackHost(settings.host);
  const stores = createControlStores(db);
  const bus = createRunEventBus(settings.streams);
  const engine = createRunController({ db, stores, bus, settings, env, clock: Date.now, log, url: () => url });
  const repos: ControlDeps['repos'] = { rootOf: repoRoot, nameOf: repoName };
  const reads = createExpensiveReads({ stats: stores.stats, path: settings.dbPath, log });
  const deps: ControlDeps = {
    db, stores, bus, engine, repos, reads, settings, env, clock: Date.now, log, url: () => url,
    refusals: createRefusalTally(stores.audit, Date.now, log),
    checkpoints: createWalCheckpointer({ db, path: settings.dbPath, log }),
    metrics: createControlMetrics(stores.runs, () => bus.size(), settings.dbPath),
  };
  const origins = new Set<string>();
  const listener = createControlApp(deps, boundToLoopback, origins);
  const { server, connections } = createHttpServer(listener, settings.connections);
  const bound = await listen(server, settings.host, settings.port);
  url = bound.url;
  origins.add(url);
  if (boundToLoopback) for (const h of LOOPBACK_HOSTS) origins.add(`http://${h}:${bound.port}`);

  const stopSweeps = startRetentionSweeps(deps);
  // After listen, yielding between projects: a start-up with many active runs still answers /health.
  const stopReading = new AbortController();
  const activeRuns = importActiveRuns(deps, stopReading.signal).catch((err: unknown) => {
    deps.log.error('could not read active runs again', { error: errorMessage(err) });
  });
  // Launches a Control Plane before this one lost (killed while its launcher failed) end now when older than a launch
  // may take, and the younger ones once they are.
  void engine.failLostLaunches();
  const lostLaunches = setTimeout(() => void engine.failLostLaunches(), LAUNCH_TIMEOUT_MS).unref();

  const close = closeOnce(async () => {
    stopSweeps();
    clearTimeout(lostLaunches);
    stopReading.abort();
    await activeRuns;
    await closeGracefully(server, async () => {
      bus.close();
      await deps.engine.close();
    });
    deps.refusals.close();
    await deps.checkpoints.close();
    await reads.close();
    db.close();
  });
  return { url, server, connections, deps, close };
}

/**
 * Records this server in server.json (what clients find it by) unless the file names another live Control Plane (its
 * pid alive and its URL answering /health); answers the record kept instead, if any. A record naming the URL this
 * server has bound is stale whatever its pid (reused, or a zombie): what answers there is this server.
 */
async function claimServerRecord(env: NodeJS.ProcessEnv, own: ServerRecord): Promise<ServerRecord | null> {
  const path = serverRecordFile(env);
  const found = readServerRecordFile(path);
  const other = found !== null && found.pid !== own.pid && URL.parse(found.url)?.origin !== URL.parse(own.url)?.origin;
  // The record's live server (its pid's start time, or an older svc's command line) gets 5 s: a busy one slower than
  // 500 ms lost its record to a second server (its clients then found the second). Only a hung one costs the wait.
  if (other && isLiveRecord(found) && (await answersHealth(found.url, 5_000))) return found;
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeJsonAtomic(path, own, 0o600);
  return null;
}

/** Only this process's own record: a first server that still answers stays findable. */
function releaseServerRecord(env: NodeJS.ProcessEnv, pid: number): void {
  if (readServerRecordFile(serverRecordFile(env))?.pid === pid) rmSync(serverRecordFile(env), { force: true });
}

/** Serves until SIGINT/SIGTERM, then shuts down once: stop accepting, end streams, close the DB, exit 0. */
export async function serveControlForever(
  settings: ControlSettings, env: NodeJS.ProcessEnv, print: (line: string) => void,
): Promise<number> {
  const log = createLogger('control');
  const running = await startControl(settings, env, log);
  // The handlers go in before server.json names this server and before the URL is printed: a supervisor (or svc's
  // own launcher, forwarding its SIGTERM) may send SIGTERM as soon as it reads either.
  const exitCode = exitCodeAfterSignal(log, 'shutting down', async () => {
    await running.close();
    releaseServerRecord(env, process.pid);
  });
  // Its start time tells this server from a later process given its pid: what the home token goes to (control-url.ts).
  const own = { url: running.url, pid: process.pid, proc_start: procStart(process.pid) ?? undefined };
  const other = await claimServerRecord(env, own);
  print(`${running.url}\n`);
  log.info('listening', { url: running.url, db: settings.dbPath });
  if (other) {
    const message = 'another Control Plane is recorded in server.json and answers: its record stays, this one is ' +
      `not recorded there; clients reach this one with SVC_CONTROL_URL=${running.url}`;
    log.warn(message, { other_url: other.url, other_pid: other.pid });
  }
  return exitCode;
}

const PRUNE_BATCH = 200;
const RETENTION_SWEEP_MS = 60 * 60 * 1000;

export function pruneExpiredRuns(deps: ControlDeps, now = deps.clock()): number {
  const days = readEffectiveConfig(deps.stores.config).config.retention_days as number;
  if (!(days > 0)) return 0;
  const before = now - days * DAY_MS;
  let deleted = 0;
  for (;;) {
    const batch = deps.stores.runs.listEnded(before, PRUNE_BATCH);
    const progress = transaction(deps.db, () =>
      batch.filter((r) => deps.stores.runs.delete(r.source, r.run) === 'deleted').length);
    deleted += progress;
    if (batch.length < PRUNE_BATCH || progress === 0) break;
  }
  if (deleted > 0) {
    deps.stores.audit.append({
      actor: 'system', peer: '', action: 'runs.prune', target: null, outcome: 'ok',
      detail: { deleted, retention_days: days, ended_before: iso(before) },
    });
    deps.log.info('retention sweep', { deleted, retention_days: days });
  }
  return deleted;
}

/** How often runs past their lease are looked for: a pod's lease has 10 minutes of grace past its deadline. */
const LEASE_SWEEP_MS = 60 * 1000;
/** Why a run ended by its lease did (endLapsedRuns). */
const LAPSED = 'Its runner shipped no end by its lease (for a Kubernetes pod, its Job\'s deadline plus 10 minutes): ' +
  'it ended without its run container or signer saying how (killed, evicted, its node lost)';

/**
 * Ends the active runs whose lease lapsed (docs/control-data.md, `runs[i].lease_until`): failed, of class infra, with
 * LAPSED, or `stopped` where a stop was asked. A pod that died with no end shipped has nobody else to end its run. The
 * Control Plane decides this alone, from the time the run's own runner gave: no sender names a run to end. A signer's
 * batch that still comes replaces the row (docs/deploy.md, "A pod that dies unheard").
 */
export function endLapsedRuns(deps: ControlDeps, now = deps.clock()): number {
  let ended = 0;
  for (;;) {
    const { lapsed, appended } = transaction(deps.db, () => {
      const lapsed = deps.stores.runs.listLapsed(now, PRUNE_BATCH);
      const appended = lapsed.map(({ source, run }) => {
        const from = deps.stores.runs.get(source, run)?.status;
        const to = from === 'stopping' ? 'stopped' : 'failed';
        const failure = to === 'stopped' ? runFailure('stopped', `Stopped as asked. ${LAPSED}`)
          : runFailure('infra', LAPSED);
        deps.stores.runs.setStatus(source, run, to, now,
          { error: to === 'failed' ? LAPSED : null, ended_at: now, ...failureColumns(failure) });
        deps.stores.audit.append({ actor: 'system', peer: '', action: 'runs.lapse', target: `${source}/${run}`,
          outcome: 'ok', detail: { from } });
        return deps.stores.events.append(source, run, { kind: 'run.status', data: { from, to }, ts: now });
      });
      return { lapsed, appended };
    });
    deps.bus.publish(appended);
    ended += appended.length;
    if (lapsed.length < PRUNE_BATCH) break;
  }
  if (ended > 0) deps.log.warn('runs ended past their lease', { ended });
  return ended;
}

/** Audit rows per prune transaction; each batch is anchored by its own `audit.prune` row. */
const AUDIT_BATCH = 5_000;

export function pruneAuditLog(deps: ControlDeps, now = deps.clock()): number {
  const days = deps.settings.auditRetentionDays;
  if (!(days > 0)) return 0;
  let deleted = 0;
  for (;;) {
    const n = deps.stores.audit.pruneBefore(now - days * DAY_MS, AUDIT_BATCH);
    deleted += n;
    if (n < AUDIT_BATCH) break;
  }
  if (deleted > 0) deps.log.info('audit retention sweep', { deleted, audit_retention_days: days });
  return deleted;
}

/** A failed sweep is logged and tried again next time; runs past their lease are looked for more often. */
function startRetentionSweeps(deps: ControlDeps): () => void {
  const every = (ms: number, what: string, work: () => void): NodeJS.Timeout => {
    const sweep = (): void => {
      try {
        work();
      } catch (err) {
        deps.log.error(`${what} failed`, { error: errorMessage(err) });
      }
    };
    sweep();
    return setInterval(sweep, ms).unref();
  };
  const timers = [
    every(RETENTION_SWEEP_MS, 'retention sweep', () => {
      pruneExpiredRuns(deps);
      pruneAuditLog(deps);
    }),
    every(LEASE_SWEEP_MS, 'lease sweep', () => endLapsedRuns(deps)),
  ];
  return () => timers.forEach(clearInterval);
}
