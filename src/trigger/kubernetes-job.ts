// Builds the batch/v1 Job that runs one trigger job as `svc start …` in its own pod, from SVC_K8S_* settings.
// The pod itself (which container runs what, and which one alone holds the signing key) is kubernetes-pod.ts.
import { newRunId } from '../engine/ids.ts';
import { buildPodSpec } from './kubernetes-pod.ts';
import type { ExecJob } from './executor.ts';
import type { KubernetesSettings } from './kubernetes-settings.ts';

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
  const labels = { [LABEL_MANAGED]: 'svc-trigger', [LABEL_JOB]: kubeJobName(job.id).slice(4) };
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
