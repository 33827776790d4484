// SVC_TRIGGER_EXECUTOR=kubernetes: each job becomes a batch/v1 Job running `svc start …` in its own pod.
// launch: create the Job (idempotent on its name) under a run id the pod spec fixes, wait for the run container's
// `{"source","run"}` line naming that run, label the Job with it. follow: poll the Control Plane for the run and the
// Job for its end; the final summary line is read from the signer container only (the run container's log is the
// agent's to write).
import { setTimeout as sleep } from 'node:timers/promises';
import { createKubeApi, inClusterApiUrl, SERVICE_ACCOUNT_DIR, type KubeApi } from './kube-api.ts';
import { createKubeJobs, kubeJobName, type JobState } from './kubernetes-jobs.ts';
import { kubernetesSettingsFromEnv, type KubernetesSettings } from './kubernetes-settings.ts';
import { RUN_CONTAINER, SIGNER_CONTAINER } from './kubernetes-pod.ts';
import {
  isTerminal, outcomeFromState, parseLaunchOutput, RUN_SEGMENT,
  type ExecJob, type JobExecutor, type LaunchResult, type RunOutcome, type RunRef,
} from './executor.ts';
import type { Logger } from '../log.ts';
import { BadSettingError, errorMessage } from '../errors.ts';

export interface KubernetesExecutorOptions {
  env: NodeJS.ProcessEnv;
  log: Logger;
  api?: KubeApi;
  settings?: KubernetesSettings;
  controlUrl?: string | undefined;
  controlToken?: string | undefined;
  fetch?: typeof fetch;
  pollMs?: number;
  /** How long a pod may take (image pull, clone) to print its run line. */
  launchTimeoutMs?: number;
  /** After the Job ends, how long to wait for the shipped run to show a final status on the Control Plane. */
  shipGraceMs?: number;
}

export function createKubernetesExecutor(opts: KubernetesExecutorOptions): JobExecutor {
  const settings = opts.settings ?? kubernetesSettingsFromEnv(opts.env);
  const apiUrl = inClusterApiUrl(opts.env);
  if (!opts.api && !apiUrl) {
    throw new BadSettingError(
      'SVC_TRIGGER_EXECUTOR=kubernetes needs KUBERNETES_SERVICE_HOST (in a cluster) or SVC_K8S_API_URL',
    );
  }
  const api = opts.api ?? createKubeApi({
    apiUrl: apiUrl!,
    serviceAccountDir: opts.env.SVC_K8S_SA_DIR || SERVICE_ACCOUNT_DIR,
    ...(settings.namespace ? { namespace: settings.namespace } : {}),
  });
  const ns = encodeURIComponent(settings.namespace || api.namespace);
  const { jobState, podLog, createJob, labelRun, findJob } = createKubeJobs(api, ns, settings, opts.env, opts.log);
  const pollMs = opts.pollMs ?? 2000;
  const launchTimeoutMs = opts.launchTimeoutMs ?? 15 * 60_000;
  const shipGraceMs = opts.shipGraceMs ?? 60_000;
  const log = opts.log;
  /** Run → Kubernetes Job name for runs launched by this process (the label covers restarts). */
  const known = new Map<string, string>();

  /** Whether the run container announced the run the pod spec fixed (a line naming any other run is ignored). */
  async function announced(name: string, runId: string): Promise<RunRef | null> {
    const lines = (await podLog(name, RUN_CONTAINER)).split('\n').filter((l) => l.includes(runId));
    const run = parseLaunchOutput(lines.join('\n'));
    return run && run.run === runId && run.source === settings.source ? run : null;
  }

  async function launch(job: ExecJob): Promise<LaunchResult> {
    const name = kubeJobName(job.id);
    try {
      const created = await createJob(job, name);
      if ('refused' in created) return { exitCode: null, run: null, error: created.refused };
      log.info('kubernetes job created', { job: job.id, kube_job: name });
      const deadline = Date.now() + launchTimeoutMs;
      for (;;) {
        let run = await announced(name, created.runId);
        const state = run ? null : await jobState(name);
        // The pod may print its line and end between the two reads: look at the log once more before giving up.
        if (!run && state!.phase !== 'running') run = await announced(name, created.runId);
        if (run) {
          known.set(`${run.source}/${run.run}`, name);
          await labelRun(name, run);
          return { exitCode: 0, run, error: null };
        }
        if (state!.phase !== 'running') {
          return {
            exitCode: state!.phase === 'complete' ? 0 : 1,
            run: null,
            error: `Kubernetes Job ${name} ended without a {"source","run"} line (${state!.reason ?? state!.phase})`,
          };
        }
        if (Date.now() > deadline) {
          const error = `Kubernetes Job ${name} printed no run within ${launchTimeoutMs} ms`;
          return { exitCode: null, run: null, error };
        }
        await sleep(pollMs);
      }
    } catch (err) {
      return { exitCode: null, run: null, error: `Kubernetes API: ${errorMessage(err)}` };
    }
  }

  async function controlOutcome(run: RunRef): Promise<RunOutcome | null> {
    if (!opts.controlUrl) return null;
    try {
      const base = opts.controlUrl.replace(/\/+$/, '');
      const url = `${base}/v1/runs/${encodeURIComponent(run.source)}/${encodeURIComponent(run.run)}`;
      const auth = opts.controlToken ? { authorization: `Bearer ${opts.controlToken}` } : {};
      const res = await (opts.fetch ?? fetch)(url, {
        headers: { accept: 'application/json', ...auth },
        signal: AbortSignal.timeout(10_000),
      });
      if (!res.ok) return null;
      const state = (await res.json()) as Record<string, unknown>;
      return isTerminal(state.status) ? outcomeFromState(state) : null;
    } catch {
      return null;
    }
  }

  /** The signer ends by printing the run's final summary line: prefer it to the Job's bare status. */
  async function outcomeFromLog(name: string): Promise<RunOutcome | null> {
    const text = await podLog(name, SIGNER_CONTAINER);
    const lines = text.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('{'));
    for (let i = lines.length - 1; i >= 0; i--) {
      try {
        const outcome = outcomeFromState(JSON.parse(lines[i]!) as Record<string, unknown>);
        if (outcome) return outcome;
      } catch {
        // not a summary line
      }
    }
    return null;
  }

  function jobOutcome(state: JobState): RunOutcome {
    const complete = state.phase === 'complete';
    return {
      status: complete ? 'succeeded' : 'failed',
      verdict: null, pr_url: null, cost_usd: null, started_at: null, ended_at: null,
      error: complete ? null : `Kubernetes Job failed: ${state.reason ?? 'unknown reason'}`,
    };
  }

  async function follow(run: RunRef, signal: AbortSignal): Promise<RunOutcome | null | 'aborted'> {
    if (!RUN_SEGMENT.test(run.source) || !RUN_SEGMENT.test(run.run)) return null;
    let name: string | null = known.get(`${run.source}/${run.run}`) ?? null;
    let missingSince: number | null = null;
    for (;;) {
      if (signal.aborted) return 'aborted';
      try {
        name ??= await findJob(run);
        const state = name ? await jobState(name) : null;
        if (!state || state.phase === 'missing') {
          // No Job to read (deleted after its TTL, or never labelled): only the Control Plane can still tell, and
          // what it holds is whatever the pod shipped last; give it the ship grace.
          const fromControl = await controlOutcome(run);
          if (fromControl) return fromControl;
          missingSince ??= Date.now();
          if (!opts.controlUrl || Date.now() - missingSince >= shipGraceMs) return null;
        } else if (state.phase !== 'running') {
          // Not the Control Plane's copy while the pod ran: the run container (the agent, with the Control Plane
          // token) could ship any status there. Only the signer writes its own log, and its summary line comes last.
          return (await outcomeFromLog(name!)) ?? jobOutcome(state);
        }
      } catch (err) {
        log.warn('kubernetes follow poll failed; retrying', { run: run.run, error: errorMessage(err) });
      }
      try {
        await sleep(pollMs, undefined, { signal });
      } catch {
        return 'aborted';
      }
    }
  }

  return { name: 'kubernetes', launch, follow };
}
