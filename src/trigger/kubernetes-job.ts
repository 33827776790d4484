// Builds the batch/v1 Job that runs one trigger job as `svc start …` in its own pod, from SVC_K8S_* settings.
// The pod gets no trigger secret: only the allowlisted environment plus what the operator names explicitly.
import { childEnv } from '../spawn/env.ts';
import type { ExecJob } from './executor.ts';

export interface KubernetesSettings {
  image: string;
  namespace: string | undefined;
  serviceAccount: string | undefined;
  cpu: string | undefined;
  memory: string | undefined;
  /** Cloned into /workspace/repo by an init container before the run. */
  repoUrl: string | undefined;
  repoRef: string | undefined;
  /** Or: a PersistentVolumeClaim holding the repository, mounted at /workspace/repo. */
  repoPvc: string | undefined;
  /** Secret whose keys become the job pod's environment (provider API keys); never the trigger's own. */
  envSecret: string | undefined;
  /** Secret with key `token`: mounted and passed as SVC_CONTROL_TOKEN_FILE so the run can ship. */
  controlTokenSecret: string | undefined;
  ttlSeconds: number;
  activeDeadlineSeconds: number;
  /** SVC_SOURCE of the pods' runs (SVC_K8S_SOURCE, default `k8s`): never the trigger host's own `local`. */
  source: string;
  /** Secret holding this runner's own receipt signing key (`receipt-ed25519.pem`), mounted as the pod's ~/.svc/keys. */
  keysSecret: string | undefined;
}

export const LABEL_MANAGED = 'app.kubernetes.io/managed-by';
export const LABEL_JOB = 'svc.dev/job-id';
export const LABEL_RUN = 'svc.dev/run';
export const CONTAINER = 'svc';
const WORKSPACE = '/workspace/repo';
const TOKEN_DIR = '/var/run/svc/control-token';
const POD_HOME = '/home/svc';
// keys.ts reads the pair from $HOME/.svc/keys; a mounted key is used as is (the folder is read-only, nothing is made).
const KEYS_DIR = `${POD_HOME}/.svc/keys`;
const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

function seconds(text: string | undefined, fallback: number, name: string): number {
  if (text === undefined || text === '') return fallback;
  if (!/^\d+$/.test(text)) throw new RangeError(`${name} must be a whole number of seconds (got "${text}")`);
  return Number(text);
}

function podSource(value: string | undefined): string {
  if (value === undefined || value === '') return 'k8s';
  if (!SEGMENT.test(value)) throw new RangeError(`SVC_K8S_SOURCE must be a run source name: letters, digits, ".", "_" or "-" (got "${value.slice(0, 64)}")`);
  return value;
}

export function kubernetesSettingsFromEnv(env: NodeJS.ProcessEnv): KubernetesSettings {
  if (!env.SVC_K8S_IMAGE) throw new RangeError('SVC_TRIGGER_EXECUTOR=kubernetes needs SVC_K8S_IMAGE (the svc container image)');
  const opt = (name: string) => env[name] || undefined;
  return {
    image: env.SVC_K8S_IMAGE,
    namespace: opt('SVC_K8S_NAMESPACE'),
    serviceAccount: opt('SVC_K8S_SERVICE_ACCOUNT'),
    cpu: opt('SVC_K8S_CPU'),
    memory: opt('SVC_K8S_MEMORY'),
    repoUrl: opt('SVC_K8S_REPO_URL'),
    repoRef: opt('SVC_K8S_REPO_REF'),
    repoPvc: opt('SVC_K8S_REPO_PVC'),
    envSecret: opt('SVC_K8S_ENV_SECRET'),
    controlTokenSecret: opt('SVC_K8S_CONTROL_TOKEN_SECRET'),
    ttlSeconds: seconds(env.SVC_K8S_TTL_SECONDS, 3600, 'SVC_K8S_TTL_SECONDS'),
    activeDeadlineSeconds: seconds(env.SVC_K8S_ACTIVE_DEADLINE_SECONDS, 6 * 3600, 'SVC_K8S_ACTIVE_DEADLINE_SECONDS'),
    source: podSource(env.SVC_K8S_SOURCE),
    keysSecret: opt('SVC_K8S_KEYS_SECRET'),
  };
}

/** DNS-1123 label: lowercase alphanumerics and '-', at most 63 characters. */
export function kubeJobName(jobId: string): string {
  return `svc-${jobId.toLowerCase().replace(/[^a-z0-9-]+/g, '-')}`.slice(0, 63).replace(/-+$/, '');
}

/** The pod runs in the foreground so the Job ends when the run ends: the launcher's trailing --detach goes. */
export function podArgs(args: readonly string[]): string[] {
  return args.at(-1) === '--detach' ? args.slice(0, -1) : [...args];
}

export function buildKubeJob(job: ExecJob, s: KubernetesSettings, namespace: string, serverEnv: NodeJS.ProcessEnv): Record<string, unknown> {
  const name = kubeJobName(job.id);
  const labels = { [LABEL_MANAGED]: 'svc-trigger', [LABEL_JOB]: kubeJobName(job.id).slice(4) };
  // Paths of the trigger host mean nothing in the pod, and its SVC_SOURCE is its own: a pod's runs get SVC_K8S_SOURCE,
  // and answers reach them through their ingest responses.
  const env = Object.entries(childEnv('launcher', serverEnv))
    .filter(([k]) => !['PATH', 'HOME', 'TMPDIR', 'SVC_SOURCE', 'SVC_CONTROL_ANSWER_DIR'].includes(k))
    .map(([k, v]) => ({ name: k, value: String(v) }));
  env.push({ name: 'HOME', value: POD_HOME }, { name: 'TMPDIR', value: '/tmp' }, { name: 'SVC_SOURCE', value: s.source });
  if (job.origin) env.push({ name: 'SVC_ORIGIN', value: job.origin });
  const mounts: Array<Record<string, unknown>> = [
    { name: 'workspace', mountPath: WORKSPACE },
    { name: 'home', mountPath: POD_HOME },
    { name: 'tmp', mountPath: '/tmp' },
  ];
  const volumes: Array<Record<string, unknown>> = [
    s.repoPvc ? { name: 'workspace', persistentVolumeClaim: { claimName: s.repoPvc } } : { name: 'workspace', emptyDir: {} },
    { name: 'home', emptyDir: {} },
    { name: 'tmp', emptyDir: {} },
  ];
  if (s.controlTokenSecret) {
    mounts.push({ name: 'control-token', mountPath: TOKEN_DIR, readOnly: true });
    volumes.push({ name: 'control-token', secret: { secretName: s.controlTokenSecret, defaultMode: 0o400 } });
    env.push({ name: 'SVC_CONTROL_TOKEN_FILE', value: `${TOKEN_DIR}/token` });
  }
  if (s.keysSecret) {
    // This runner's own key, whose public half the Control Plane has registered (keys/trusted/): never its own key.
    mounts.push({ name: 'signing-key', mountPath: KEYS_DIR, readOnly: true });
    volumes.push({ name: 'signing-key', secret: { secretName: s.keysSecret, defaultMode: 0o400 } });
  }
  const containerSecurity = { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };
  const resources = s.cpu || s.memory
    ? { requests: { ...(s.cpu ? { cpu: s.cpu } : {}), ...(s.memory ? { memory: s.memory } : {}) }, limits: { ...(s.memory ? { memory: s.memory } : {}) } }
    : undefined;
  const clone = s.repoUrl && !s.repoPvc
    ? [{
        name: 'clone',
        image: s.image,
        command: ['git', 'clone', '--depth', '50', ...(s.repoRef ? ['--branch', s.repoRef] : []), '--', s.repoUrl, WORKSPACE],
        env: [{ name: 'HOME', value: POD_HOME }],
        volumeMounts: mounts.filter((m) => m.name !== 'control-token' && m.name !== 'signing-key'),
        securityContext: containerSecurity,
      }]
    : [];
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace, labels },
    spec: {
      // A run is not idempotent (it may open a PR): never let Kubernetes start it a second time.
      backoffLimit: 0,
      ttlSecondsAfterFinished: s.ttlSeconds,
      activeDeadlineSeconds: s.activeDeadlineSeconds,
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: 'Never',
          ...(s.serviceAccount ? { serviceAccountName: s.serviceAccount } : {}),
          automountServiceAccountToken: false,
          securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001, seccompProfile: { type: 'RuntimeDefault' } },
          ...(clone.length ? { initContainers: clone } : {}),
          containers: [{
            name: CONTAINER,
            image: s.image,
            args: podArgs(job.args),
            workingDir: WORKSPACE,
            env,
            ...(s.envSecret ? { envFrom: [{ secretRef: { name: s.envSecret } }] } : {}),
            ...(resources ? { resources } : {}),
            volumeMounts: mounts,
            securityContext: containerSecurity,
          }],
          volumes,
        },
      },
    },
  };
}
