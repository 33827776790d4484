// SVC_TRIGGER_EXECUTOR=kubernetes: each job becomes a batch/v1 Job running `svc start …` in its own pod.
// launch: create the Job (idempotent on its name), read the run identity from the pod's `{"source","run"}` log
// line, label the Job with it. follow: poll the Control Plane for the run and the Job for its end.
import { setTimeout as sleep } from 'node:timers/promises';
import { createKubeApi, inClusterApiUrl, SERVICE_ACCOUNT_DIR, type KubeApi } from './kube-api.ts';
import { buildKubeJob, kubeJobName, kubernetesSettingsFromEnv, CONTAINER, LABEL_RUN, type KubernetesSettings } from './kubernetes-job.ts';
import { isTerminal, outcomeFromState, parseLaunchOutput, RUN_SEGMENT, type ExecJob, type JobExecutor, type LaunchResult, type RunOutcome, type RunRef } from './executor.ts';
import type { Logger } from '../log.ts';

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

type JobState = { phase: 'running' | 'complete' | 'failed' | 'missing'; reason: string | null };

export function createKubernetesExecutor(opts: KubernetesExecutorOptions): JobExecutor {
  const settings = opts.settings ?? kubernetesSettingsFromEnv(opts.env);
  const apiUrl = inClusterApiUrl(opts.env);
  if (!opts.api && !apiUrl) throw new RangeError('SVC_TRIGGER_EXECUTOR=kubernetes needs KUBERNETES_SERVICE_HOST (in a cluster) or SVC_K8S_API_URL');
  const api = opts.api ?? createKubeApi({ apiUrl: apiUrl!, serviceAccountDir: opts.env.SVC_K8S_SA_DIR || SERVICE_ACCOUNT_DIR, ...(settings.namespace ? { namespace: settings.namespace } : {}) });
  const ns = encodeURIComponent(settings.namespace || api.namespace);
  const jobsPath = `/apis/batch/v1/namespaces/${ns}/jobs`;
  const pollMs = opts.pollMs ?? 2000;
  const launchTimeoutMs = opts.launchTimeoutMs ?? 15 * 60_000;
  const shipGraceMs = opts.shipGraceMs ?? 60_000;
  const log = opts.log;
  /** Run → Kubernetes Job name for runs launched by this process (the label covers restarts). */
  const known = new Map<string, string>();

  async function jobState(name: string): Promise<JobState> {
    const res = await api.request('GET', `${jobsPath}/${encodeURIComponent(name)}`);
    if (res.status === 404) return { phase: 'missing', reason: null };
    if (res.status !== 200) throw new Error(`Kubernetes API answered ${res.status} reading Job ${name}`);
    const status = ((res.body as { status?: Record<string, unknown> }).status ?? {}) as { succeeded?: number; failed?: number; conditions?: Array<{ type: string; status: string; reason?: string; message?: string }> };
    const done = (status.conditions ?? []).find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
    if (done?.type === 'Complete' || (status.succeeded ?? 0) > 0) return { phase: 'complete', reason: null };
    if (done?.type === 'Failed' || (status.failed ?? 0) > 0) return { phase: 'failed', reason: done?.message ?? done?.reason ?? 'pod failed' };
    return { phase: 'running', reason: null };
  }

  async function podLog(name: string): Promise<string> {
    const pods = await api.request('GET', `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(`job-name=${name}`)}`);
    const items = ((pods.body as { items?: Array<{ metadata?: { name?: string } }> } | null)?.items ?? []);
    let text = '';
    for (const pod of items) {
      if (!pod.metadata?.name) continue;
      const res = await api.request('GET', `/api/v1/namespaces/${ns}/pods/${encodeURIComponent(pod.metadata.name)}/log?container=${CONTAINER}&limitBytes=65536`);
      if (res.status === 200) text += `${res.text}\n`;
    }
    return text;
  }

  async function createJob(job: ExecJob, name: string): Promise<string | null> {
    const res = await api.request('POST', jobsPath, buildKubeJob(job, settings, decodeURIComponent(ns), opts.env));
    // 409: this job's Kubernetes Job already exists (the server restarted mid-launch): follow that one.
    if (res.status === 201 || res.status === 200 || res.status === 202 || res.status === 409) return null;
    const message = (res.body as { message?: unknown } | null)?.message;
    return `Kubernetes API refused Job ${name} (${res.status}${typeof message === 'string' ? `: ${message.slice(0, 200)}` : ''})`;
  }

  async function launch(job: ExecJob): Promise<LaunchResult> {
    const name = kubeJobName(job.id);
    try {
      const refused = await createJob(job, name);
      if (refused) return { exitCode: null, run: null, error: refused };
      log.info('kubernetes job created', { job: job.id, kube_job: name });
      const deadline = Date.now() + launchTimeoutMs;
      for (;;) {
        const run = parseLaunchOutput(await podLog(name));
        if (run) {
          known.set(`${run.source}/${run.run}`, name);
          await labelRun(name, run);
          return { exitCode: 0, run, error: null };
        }
        const state = await jobState(name);
        if (state.phase !== 'running') {
          return { exitCode: state.phase === 'complete' ? 0 : 1, run: null, error: `Kubernetes Job ${name} ended without a {"source","run"} line (${state.reason ?? state.phase})` };
        }
        if (Date.now() > deadline) return { exitCode: null, run: null, error: `Kubernetes Job ${name} printed no run within ${launchTimeoutMs} ms` };
        await sleep(pollMs);
      }
    } catch (err) {
      return { exitCode: null, run: null, error: `Kubernetes API: ${err instanceof Error ? err.message : String(err)}` };
    }
  }

  /** A label lets a restarted server find the Job of a run it re-attaches to. */
  async function labelRun(name: string, run: RunRef): Promise<void> {
    const res = await api.request('PATCH', `${jobsPath}/${encodeURIComponent(name)}`, { metadata: { labels: { [LABEL_RUN]: run.run }, annotations: { 'svc.dev/source': run.source } } }, 'application/merge-patch+json');
    if (res.status !== 200) log.warn('could not label the Kubernetes Job with its run', { kube_job: name, status: res.status });
  }

  async function findJob(run: RunRef): Promise<string | null> {
    const res = await api.request('GET', `${jobsPath}?labelSelector=${encodeURIComponent(`${LABEL_RUN}=${run.run}`)}`);
    const items = ((res.body as { items?: Array<{ metadata?: { name?: string } }> } | null)?.items ?? []);
    return items[0]?.metadata?.name ?? null;
  }

  async function controlOutcome(run: RunRef): Promise<RunOutcome | null> {
    if (!opts.controlUrl) return null;
    try {
      const res = await (opts.fetch ?? fetch)(`${opts.controlUrl.replace(/\/+$/, '')}/v1/runs/${encodeURIComponent(run.source)}/${encodeURIComponent(run.run)}`, {
        headers: { accept: 'application/json', ...(opts.controlToken ? { authorization: `Bearer ${opts.controlToken}` } : {}) },
        signal: AbortSignal.timeout(10_000),
      });
      if (!res.ok) return null;
      const state = (await res.json()) as Record<string, unknown>;
      return isTerminal(state.status) ? outcomeFromState(state) : null;
    } catch {
      return null;
    }
  }

  /** Foreground `svc start` ends by printing the run's final summary line: prefer it to the Job's bare status. */
  async function outcomeFromLog(name: string): Promise<RunOutcome | null> {
    const lines = (await podLog(name)).split('\n').map((l) => l.trim()).filter((l) => l.startsWith('{'));
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
    return { status: state.phase === 'complete' ? 'succeeded' : 'failed', verdict: null, pr_url: null, cost_usd: null, started_at: null, ended_at: null, error: state.phase === 'complete' ? null : `Kubernetes Job failed: ${state.reason ?? 'unknown reason'}` };
  }

  async function follow(run: RunRef, signal: AbortSignal, _opts: { reattach: boolean }): Promise<RunOutcome | null | 'aborted'> {
    if (!RUN_SEGMENT.test(run.source) || !RUN_SEGMENT.test(run.run)) return null;
    let name: string | null = known.get(`${run.source}/${run.run}`) ?? null;
    let endedAt: number | null = null;
    let missingSince: number | null = null;
    for (;;) {
      if (signal.aborted) return 'aborted';
      try {
        const fromControl = await controlOutcome(run);
        if (fromControl) return fromControl;
        name ??= await findJob(run);
        if (!name) {
          // Nothing to watch in the cluster: only the Control Plane can still tell us; give it the ship grace.
          missingSince ??= Date.now();
          if (!opts.controlUrl || Date.now() - missingSince >= shipGraceMs) return null;
        } else {
          const state = await jobState(name);
          if (state.phase === 'missing') return null;
          if (state.phase !== 'running') {
            endedAt ??= Date.now();
            // The pod's last act is shipping; give the Control Plane a moment before settling for the Job's view.
            if (!opts.controlUrl || Date.now() - endedAt >= shipGraceMs) return (await outcomeFromLog(name)) ?? jobOutcome(state);
          }
        }
      } catch (err) {
        log.warn('kubernetes follow poll failed; retrying', { run: run.run, error: err instanceof Error ? err.message : String(err) });
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
