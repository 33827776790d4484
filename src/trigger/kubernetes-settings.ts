// The Kubernetes executor's SVC_K8S_* settings, read and checked once (docs/deploy.md). Apart from the Job and Pod
// builders so both read them without importing each other (DESIGN §8: no circles).
import { readGateSecret } from '../gate/job-credential.ts';
import { BadSettingError } from '../errors.ts';
import { setting, settingInt, settingOr, type SettingName } from '../settings-registry.ts';

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
  /** Secret holding this runner's own receipt signing key (`receipt-ed25519.pem`): mounted in the signer only. */
  keysSecret: string | undefined;
  /** Secret whose keys become the signer container's environment only (GITHUB_TOKEN for the pull request). */
  signerEnvSecret: string | undefined;
  /** `svc gate serve`'s URL (SVC_K8S_GATE_URL, e.g. http://svc-gate:3128): the pod's only route out. */
  gateUrl: string | undefined;
  /** With a gate: the secret each pod's job credential is minted with (SVC_GATE_SECRET_FILE, shared with the gate). */
  gateSecret: Buffer | undefined;
}

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

function podSource(value: string): string {
  if (!SEGMENT.test(value)) {
    throw new BadSettingError(
      `SVC_K8S_SOURCE must be a run source name: letters, digits, ".", "_" or "-" (got "${value.slice(0, 64)}")`,
    );
  }
  return value;
}

function gateUrlOf(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!/^http:\/\/[A-Za-z0-9.-]+(:\d{1,5})?\/?$/.test(value)) {
    throw new BadSettingError(`SVC_K8S_GATE_URL must be http://<service>[:port] (got "${value.slice(0, 64)}")`);
  }
  return value;
}

export function kubernetesSettingsFromEnv(env: NodeJS.ProcessEnv): KubernetesSettings {
  const image = setting(env, 'SVC_K8S_IMAGE');
  if (!image) {
    throw new BadSettingError('SVC_TRIGGER_EXECUTOR=kubernetes needs SVC_K8S_IMAGE (the svc container image)');
  }
  const opt = (name: SettingName) => setting(env, name);
  return {
    image,
    namespace: opt('SVC_K8S_NAMESPACE'),
    serviceAccount: opt('SVC_K8S_SERVICE_ACCOUNT'),
    cpu: opt('SVC_K8S_CPU'),
    memory: opt('SVC_K8S_MEMORY'),
    repoUrl: opt('SVC_K8S_REPO_URL'),
    repoRef: opt('SVC_K8S_REPO_REF'),
    repoPvc: opt('SVC_K8S_REPO_PVC'),
    envSecret: opt('SVC_K8S_ENV_SECRET'),
    controlTokenSecret: opt('SVC_K8S_CONTROL_TOKEN_SECRET'),
    ttlSeconds: settingInt(env, 'SVC_K8S_TTL_SECONDS'),
    activeDeadlineSeconds: settingInt(env, 'SVC_K8S_ACTIVE_DEADLINE_SECONDS'),
    source: podSource(settingOr(env, 'SVC_K8S_SOURCE')),
    keysSecret: opt('SVC_K8S_KEYS_SECRET'),
    signerEnvSecret: opt('SVC_K8S_SIGNER_ENV_SECRET'),
    gateUrl: gateUrlOf(opt('SVC_K8S_GATE_URL')),
    gateSecret: gateSecretOf(opt('SVC_K8S_GATE_URL'), opt('SVC_GATE_SECRET_FILE')),
  };
}

/** The gate refuses pods without a credential: a gate URL without the secret to mint one is a setting error. */
function gateSecretOf(gateUrl: string | undefined, file: string | undefined): Buffer | undefined {
  if (gateUrl === undefined) return undefined;
  if (file === undefined) {
    throw new BadSettingError('SVC_K8S_GATE_URL needs SVC_GATE_SECRET_FILE (the secret `svc gate serve` checks with)');
  }
  return readGateSecret(file);
}
