// How the Control Plane starts and steers runs on this machine: `svc start … --detach` children with an allowlisted
// env. It never runs a provider itself; stop goes through the engine's identity-checked process-group stop.
import {
  LAUNCH_TIMEOUT_MS, secretsIn, startChild, withoutSecrets, WORKER_SECRET_NAMES, type ChildProcess, type ChildSpec,
} from '../spawn/start.ts';
import { svcCliPath } from '../spawn/svc-paths.ts';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { failureColumns, type RunRow } from '../db/run-types.ts';
import type { ControlStores } from '../db/control-stores.ts';
import { transaction, untilWritten, type Db } from '../db/open.ts';
import type { Logger } from '../log.ts';
import { stopLocalRun } from '../engine/run-context.ts';
import { runDir } from '../engine/paths.ts';
import { controlRunEnv, operatorPassedEnv } from '../engine/config.ts';
import { readEffectiveConfig } from './config-schema.ts';
import { TERMINAL, isResume, readFailure, runFailure, type RunFailure } from '../run-json.ts';
import { obj, tryParseJson } from '../untrusted.ts';
import { errorMessage } from '../errors.ts';
import type { RunEventBus } from './event-bus.ts';
import type { ControlSettings } from './settings.ts';

/** Not all of ControlDeps, which holds the controller: no circle between the two. */
interface RunControllerDeps {
  db: Db;
  stores: Pick<ControlStores, 'runs' | 'events' | 'config'>;
  bus: Pick<RunEventBus, 'publish'>;
  settings: Pick<ControlSettings, 'source' | 'answerDir' | 'token'>;
  env: NodeJS.ProcessEnv;
  clock: () => number;
  log: Logger;
  /** The launched runs' SVC_CONTROL_URL, once bound. */
  url: () => string;
}

export type RunController = ReturnType<typeof createRunController>;
type OnFailure = 'fail-run' | 'event-only';
/** A resume this server made: the row before it set the run running, and the newest event id stored then. */
export type Resumed = { row: RunRow; after: number };

/** How much of a launcher's stdout and stderr is kept, each, to say why it failed. */
const OUTPUT_CAP = 16 * 1024;
/** The error of a run whose launch a Control Plane before this one lost (failLostLaunches). */
const LOST_LAUNCH = 'Its launcher was lost: the run\'s folder never appeared (the Control Plane that launched it ' +
  'stopped before its launcher ended)';
/** Queued runs read at once when looking for lost launches. */
const LIST_PAGE = 500;
/** Who a run this server stops was stopped by, as its failure says. */
const STOPPED_BY = 'the Control Plane (a stop request)';

// The spawn policy's 'control-launcher' allowlist minus every secret value, plus how to reach this server and the
// names the operator passes to agents; the secrets it needs go through the handoff pipe (DESIGN §7a).
function childSpec(deps: RunControllerDeps): ChildSpec {
  const extra: Record<string, string> = {
    ...operatorPassedEnv(deps.env),
    SVC_CONTROL_URL: deps.url(),
    SVC_SOURCE: deps.settings.source,
    SVC_CONTROL_ANSWER_DIR: deps.settings.answerDir,
    // Its `providers` setting is the operator's (DESIGN §7a): the run resolves them as operator.json's (config.ts).
    ...controlRunEnv(readEffectiveConfig(deps.stores.config).config.providers),
  };
  return { kind: 'control-launcher', base: withoutSecrets(deps.env), extra };
}

/**
 * The credentials a launched run uses itself (push, ingest, issue fetch); ingest's token is this server's own. A new
 * run's key goes to its launcher alone, which writes the run's `run-key` (run-state.ts runKeyFor).
 */
function runSecrets(deps: RunControllerDeps, runKey: string | undefined): Record<string, string> {
  const secrets = secretsIn({ ...deps.env, SVC_CONTROL_TOKEN: deps.settings.token }, WORKER_SECRET_NAMES);
  return runKey === undefined ? secrets : { ...secrets, SVC_RUN_KEY: runKey };
}

export function createRunController(deps: RunControllerDeps) {
  const pending = new Set<Promise<unknown>>();
  // Each launcher still running, by `source/run`, with when it exits: a stop may come before it made the run's folder.
  const launchers = new Map<string, { child: ChildProcess; exited: Promise<unknown> }>();
  // Launchers a stop ended: their exit is the stop's doing, not a failed launch.
  const ended = new WeakSet<ChildProcess>();
  // Each stop under way, by `source/run`: a stop asked again meanwhile is that one.
  const stops = new Map<string, Promise<void>>();

  /**
   * Once every launch, stop and record set going has ended, with what each set going in turn (a launcher's exit
   * records its failure): a late write is never one of the next request's.
   */
  async function settled(): Promise<void> {
    while (pending.size > 0) await Promise.allSettled([...pending]);
  }

  function track<T>(p: Promise<T>): Promise<T> {
    pending.add(p);
    void p.finally(() => pending.delete(p));
    return p;
  }

  // Ends the failed-launch records still waiting for the database when this server closes.
  const closing = new AbortController();
  // The runs whose failed launch is still waiting to be recorded: no lost-launch record of them as well.
  const recording = new Set<string>();

  /**
   * Does `write`, again each second while the database refuses it for now (untilWritten), until it is done or this
   * server closes; logs `what` at the first refusal and when given up. Anything else the database throws is logged,
   * never the end of this server.
   */
  function untilDone(write: () => void, what: string, fields: Record<string, string>): Promise<unknown> {
    let told = false;
    const failed = (err: unknown): void => {
      if (!told) deps.log.error(what, { ...fields, error: errorMessage(err) });
      told = true;
    };
    return track(untilWritten(deps.db, write, closing.signal, failed).catch((err: unknown) => {
      told = false; // the last word: given up, not only put off
      failed(err);
    }));
  }

  /**
   * Records a failed launch; a write the database refuses for now is tried again each second (else the run stays
   * queued, holding a `max_concurrent_runs` slot), until it is taken or this server closes.
   */
  function recordFailure(
    source: string, run: string, message: string, mode: OnFailure, failure: RunFailure | null,
    putBack: Resumed | null = null,
  ): void {
    const write = (): void => {
      const now = deps.clock();
      const appended = transaction(deps.db, () => {
        const row = deps.stores.runs.get(source, run);
        if (putBack !== null && row?.status === 'running') {
          if (!resumedElsewhere(source, run, putBack)) {
            // A resume refused before it queued the run again: the run is what it was, its end and failure kept, and
            // its time too, so a runner's update written since (a resume from elsewhere not yet shipped) still wins.
            const was = putBack.row;
            deps.stores.runs.setStatus(source, run, was.status, was.updated_at, {
              ended_at: was.ended_at, error: was.error, failure_class: was.failure_class,
              failure_reason: was.failure_reason, failure_retryable: was.failure_retryable,
            });
          }
        } else if (mode === 'fail-run' && row && (row.status === 'queued' || row.status === 'running')) {
          // The launcher said why (its stdout, src/cli/start.ts, or exit 2); one that said nothing failed on our side.
          const columns = failureColumns(failure ?? runFailure('infra', message));
          deps.stores.runs.setStatus(source, run, 'failed', now, { error: message, ended_at: now, ...columns });
        }
        return row ? deps.stores.events.append(source, run, { kind: 'error', data: { message }, ts: now }) : null;
      });
      if (appended) deps.bus.publish([appended]);
    };
    const key = `${source}/${run}`;
    recording.add(key);
    void untilDone(write, 'could not record the failed launch', { source, run }).finally(() => recording.delete(key));
    deps.log.warn('run launch failed', { source, run, error: message });
  }

  /**
   * Whether a runner resumed the run since this server's resume set it running (`svc start --resume` run by hand, whose
   * take made this one's launcher refuse): its own move out of the stop or failure arrived after `after`.
   */
  function resumedElsewhere(source: string, run: string, { after }: Resumed): boolean {
    const moves = deps.stores.events.runnerDataAfter(source, run, 'run.status', after);
    return moves.some((text) => isResume(obj(tryParseJson(text))));
  }

  return {
    /**
     * Runs `svc <args…>` (a launcher); if it fails, the run says why. `traceparent`: validated, continued. `runKey`:
     * the key of the new run it makes, already bound to its row (handlers/actions.ts). `resumed`: the row before a
     * resume set it running, which it is again when the launcher refused the resume (`{"refused":…}`, start.ts)
     * unless a runner resumed it meanwhile.
     */
    launch(
      source: string, run: string, args: string[], onFailure: OnFailure,
      opts: { traceparent?: string; runKey?: string; resumed?: Resumed } = {},
    ): void {
      const spec = childSpec(deps);
      if (opts.traceparent) spec.extra = { ...spec.extra, SVC_TRACEPARENT: opts.traceparent };
      const child = startChild([process.execPath, svcCliPath(), ...args], {
        ...spec, stdio: ['ignore', 'pipe', 'pipe'], secrets: runSecrets(deps, opts.runKey),
      });
      const key = `${source}/${run}`;
      // Its exit, or the error that it never started: either way it is gone (once rejects on the error).
      const exited = once(child, 'exit').catch(() => {});
      launchers.set(key, { child, exited });
      void exited.then(() => {
        if (launchers.get(key)?.child === child) launchers.delete(key);
      });
      const output = { stdout: '', stderr: '' };
      for (const name of ['stdout', 'stderr'] as const) {
        child[name]?.on('data', (c: Buffer) => {
          if (output[name].length < OUTPUT_CAP) output[name] += c.toString('utf8');
        });
      }
      track(
        new Promise<void>((resolve) => {
          child.on('error', (err) => {
            recordFailure(source, run, `Could not start svc: ${err.message}`, onFailure, null);
            resolve();
          });
          child.on('close', (code, signal) => {
            if (code !== 0 && !ended.has(child)) {
              const line = output.stderr.trim().split('\n').pop() ?? '';
              // A launcher killed (out of memory, a kill) said nothing of why: its last line was not its last word.
              const why = signal ? `svc start was killed by ${signal}`
                : line.replace(/^svc start: /, '') || `svc start exited with code ${code}`;
              // A launcher that could not make its run printed `{"failure":…}` last, one that refused a resume
              // `{"refused":…}` (read as untrusted).
              const last = obj(tryParseJson(output.stdout.trim().split('\n').pop() ?? ''));
              const putBack = typeof last.refused === 'string' ? opts.resumed ?? null : null;
              // Exit 2 without that line (a setting refused before the command ran) is still a bad input or setting
              // (src/errors.ts), class config as failureOf classes those: running it again unchanged will not help.
              const said = readFailure(last.failure) ?? (code === 2 ? runFailure('config', why) : null);
              recordFailure(source, run, why, onFailure, said, putBack);
            }
            resolve();
          });
        }),
      );
    },
    /**
     * Stops a run whose folder is recorded (status already set to stopping by the caller); resolves once stopped.
     * `again` (asked again while stopping) joins a stop under way; any other runs after it, as one taken before a
     * resume looked before that resume's launcher was there.
     */
    stop(row: RunRow, again = false): Promise<void> {
      const key = `${row.source}/${row.run}`;
      const under = stops.get(key);
      if (under && again) return under;
      const stopping = track(
        (async () => {
          await under;
          let status = 'stopped';
          let endedAt = deps.clock();
          let failure: RunFailure | null = runFailure('stopped', `stopped by ${STOPPED_BY}`);
          // A launcher still at work may not have made the run's folder yet, and would start its worker after the
          // stop looked: it ends first. Whatever it had made by then (a folder, a worker) is stopped below.
          const launcher = launchers.get(`${row.source}/${row.run}`);
          if (launcher) {
            ended.add(launcher.child);
            launcher.child.kill('SIGKILL');
            await launcher.exited;
          }
          const state = await stopLocalRun(row.repo_path!, row.run, STOPPED_BY).catch(() => null);
          if (state) {
            status = state.status;
            endedAt = state.ended_at ? Date.parse(state.ended_at) : endedAt;
            failure = state.failure ?? null;
          }
          // The worker ships its own "stopped"; this covers a worker that was killed before it could.
          const now = deps.clock();
          const current = deps.stores.runs.get(row.source, row.run);
          if (current && !TERMINAL.has(current.status)) {
            const final = status === 'succeeded' || status === 'failed' ? status : 'stopped';
            deps.stores.runs.setStatus(row.source, row.run, final, now, {
              ended_at: endedAt, question: null, ...failureColumns(failure),
            });
            const data = { from: current.status, to: final };
            deps.bus.publish([deps.stores.events.append(row.source, row.run, { kind: 'run.status', data, ts: now })]);
          } else if (current?.status === 'stopped' && current.failure_class === 'stopped' && failure) {
            // The worker shipped the signal it got; who sent it is known here.
            deps.stores.runs.patch(row.source, row.run, { ...failureColumns(failure), updated_at: now });
          }
        })().catch((err: unknown) => {
          // A database another process holds locked, or a full disk: the worker's shipped state ends the row later.
          deps.log.error('could not record the stop', { source: row.source, run: row.run, error: errorMessage(err) });
        }),
      );
      stops.set(key, stopping);
      void stopping.finally(() => {
        if (stops.get(key) === stopping) stops.delete(key);
      });
      return stopping;
    },
    /**
     * Fails the runs a launch of this server's source lost: queued, in a folder recorded here, with no launcher of
     * this process at work, no run folder made and no status shipped after a launch's time (a Control Plane killed
     * while its launcher failed). Else each holds a `max_concurrent_runs` slot for ever. The look only reads, which
     * another process's write lock does not refuse (WAL), and its failures are recorded with their own retries: a
     * look that throws (a disk error) is tried again each second (untilWritten), until it is done or this closes.
     */
    failLostLaunches(): Promise<unknown> {
      const source = deps.settings.source;
      const before = deps.clock() - LAUNCH_TIMEOUT_MS;
      const look = (): void => {
        for (const row of deps.stores.runs.each({ status: 'queued', source, until: before, limit: LIST_PAGE })) {
          const key = `${source}/${row.run}`;
          if (row.repo_path === null || launchers.has(key) || recording.has(key)) continue;
          if (existsSync(runDir(row.repo_path, row.run))) continue;
          if (deps.stores.events.latest(source, row.run, 'run.status') !== undefined) continue;
          recordFailure(source, row.run, LOST_LAUNCH, 'fail-run', null);
        }
      };
      return untilDone(look, 'could not look for lost launches', {});
    },
    settled,
    async close() {
      closing.abort();
      await Promise.race([settled(), new Promise((r) => setTimeout(r, 15_000).unref())]);
    },
  };
}
