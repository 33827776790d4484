// The batch/v1 Job that runs one trigger job as `svc start …` in its own pod (from SVC_K8S_* settings; the pod itself,
// which container runs what and which one alone holds the signing key, is kubernetes-pod.ts), and the Kubernetes API
// calls the executor makes about its Jobs in one namespace: create one (idempotent on its name), read its state and
// its pods' logs, label it with its run, and find it again by that label.
import type { KubeApi } from './kube-api.ts';
import type { KubernetesSettings } from './kubernetes-settings.ts';
import { newRunId } from '../engine/ids.ts';
import { RUN_SEGMENT, type ExecJob, type RunRef } from './executor.ts';
import { buildPodSpec, SIGNER_CONTAINER } from './kubernetes-pod.ts';
import type { Logger } from '../log.ts';
import { FailedError } from '../errors.ts';

export const LABEL_MANAGED = 'app.kubernetes.io/managed-by';
export const LABEL_JOB = 'svc.dev/job-id';
export const LABEL_RUN = 'svc.dev/run';

/** DNS-1123 label: lowercase alphanumerics and '-', at most 63 characters. */
export function kubeJobName(jobId: string): string {
  return `svc-${jobId.toLowerCase().replace(/[^a-z0-9-]+/g, '-')}`.slice(0, 63).replace(/-+$/, '');
}

export function buildKubeJob(
  // The pod clones its own checkout (deploy.md): the server's workdir means nothing there.
  job: Omit<ExecJob, 'workdir'>, s: KubernetesSettings, namespace: string, serverEnv: NodeJS.ProcessEnv,
  runId: string = newRunId(),
): Record<string, unknown> {
  const name = kubeJobName(job.id);
  const labels = { [LABEL_MANAGED]: 'svc-trigger', [LABEL_JOB]: name.slice(4) };
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace, labels },
    spec: {
      // A run is not idempotent (it may open a PR): never let Kubernetes start it a second time.
      backoffLimit: 0,
      ttlSecondsAfterFinished: s.ttlSeconds,
      activeDeadlineSeconds: s.activeDeadlineSeconds,
      template: { metadata: { labels }, spec: buildPodSpec(job, s, serverEnv, runId) },
    },
  };
}

export type JobState = { phase: 'running' | 'complete' | 'failed' | 'missing'; reason: string | null };

/** The part of a Job's `status` read here. */
type JobStatus = {
  succeeded?: number;
  failed?: number;
  conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
};

export interface KubeJobs {
  jobState(name: string): Promise<JobState>;
  podLog(name: string, container: string): Promise<string>;
  createJob(job: ExecJob, name: string): Promise<{ runId: string } | { refused: string }>;
  labelRun(name: string, run: RunRef): Promise<void>;
  findJob(run: RunRef): Promise<string | null>;
}

export function createKubeJobs(
  api: KubeApi, ns: string, settings: KubernetesSettings, env: NodeJS.ProcessEnv, log: Logger,
): KubeJobs {
  const jobsPath = `/apis/batch/v1/namespaces/${ns}/jobs`;

  async function jobState(name: string): Promise<JobState> {
    const res = await api.request('GET', `${jobsPath}/${encodeURIComponent(name)}`);
    if (res.status === 404) return { phase: 'missing', reason: null };
    if (res.status !== 200) throw new FailedError(`Kubernetes API answered ${res.status} reading Job ${name}`);
    const status = ((res.body as { status?: Record<string, unknown> }).status ?? {}) as JobStatus;
    const done = (status.conditions ?? [])
      .find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
    if (done?.type === 'Complete' || (status.succeeded ?? 0) > 0) return { phase: 'complete', reason: null };
    if (done?.type === 'Failed' || (status.failed ?? 0) > 0) {
      return { phase: 'failed', reason: done?.message ?? done?.reason ?? 'pod failed' };
    }
    return { phase: 'running', reason: null };
  }

  async function podLog(name: string, container: string): Promise<string> {
    const selector = encodeURIComponent(`job-name=${name}`);
    const pods = await api.request('GET', `/api/v1/namespaces/${ns}/pods?labelSelector=${selector}`);
    const items = ((pods.body as { items?: Array<{ metadata?: { name?: string } }> } | null)?.items ?? []);
    let text = '';
    for (const pod of items) {
      if (!pod.metadata?.name) continue;
      const podPath = `/api/v1/namespaces/${ns}/pods/${encodeURIComponent(pod.metadata.name)}`;
      const res = await api.request('GET', `${podPath}/log?container=${container}&limitBytes=65536`);
      if (res.status === 200) text += `${res.text}\n`;
    }
    return text;
  }

  /** The run id the Job's pod spec fixed: ours when we created it, else the existing Job's (a restart mid-launch). */
  async function createJob(job: ExecJob, name: string): Promise<{ runId: string } | { refused: string }> {
    const runId = newRunId();
    const body = buildKubeJob(job, settings, decodeURIComponent(ns), env, runId);
    const res = await api.request('POST', jobsPath, body);
    if (res.status === 201 || res.status === 200 || res.status === 202) return { runId };
    if (res.status === 409) {
      const existing = await api.request('GET', `${jobsPath}/${encodeURIComponent(name)}`);
      const found = runIdOf(existing.body);
      if (found) return { runId: found };
      return { refused: `Kubernetes Job ${name} already exists without a run id in its pod spec` };
    }
    const message = (res.body as { message?: unknown } | null)?.message;
    const detail = typeof message === 'string' ? `: ${message.slice(0, 200)}` : '';
    return { refused: `Kubernetes API refused Job ${name} (${res.status}${detail})` };
  }

  /** A label lets a restarted server find the Job of a run it re-attaches to. */
  async function labelRun(name: string, run: RunRef): Promise<void> {
    const patch = { metadata: { labels: { [LABEL_RUN]: run.run }, annotations: { 'svc.dev/source': run.source } } };
    const path = `${jobsPath}/${encodeURIComponent(name)}`;
    const res = await api.request('PATCH', path, patch, 'application/merge-patch+json');
    if (res.status !== 200) {
      log.warn('could not label the Kubernetes Job with its run', { kube_job: name, status: res.status });
    }
  }

  async function findJob(run: RunRef): Promise<string | null> {
    const res = await api.request('GET', `${jobsPath}?labelSelector=${encodeURIComponent(`${LABEL_RUN}=${run.run}`)}`);
    const items = ((res.body as { items?: Array<{ metadata?: { name?: string } }> } | null)?.items ?? []);
    return items[0]?.metadata?.name ?? null;
  }

  return { jobState, podLog, createJob, labelRun, findJob };
}

/** `--run-id` of the signer container in a Job as the API returned it, or null. */
function runIdOf(job: unknown): string | null {
  type Spec = { spec?: { template?: { spec?: { containers?: Array<{ name?: unknown; args?: unknown }> } } } };
  const containers = (job as Spec | null)?.spec?.template?.spec?.containers;
  const args = Array.isArray(containers) ? containers.find((c) => c?.name === SIGNER_CONTAINER)?.args : undefined;
  if (!Array.isArray(args)) return null;
  const value: unknown = args[args.indexOf('--run-id') + 1];
  return typeof value === 'string' && RUN_SEGMENT.test(value) && args.includes('--run-id') ? value : null;
}
