// The Kubernetes executor's SVC_K8S_* settings, read and checked once (docs/deploy.md). Apart from the Job and Pod
// builders so both read them without importing each other (DESIGN §8: no circles).
import { readGateSecret } from '../gate/job-credential.ts';
import { BadSettingError } from '../errors.ts';
import { setting, settingInt, settingOr, type SettingName } from '../settings-registry.ts';

/** Each field is its SVC_K8S_* variable (src/settings-registry.ts); `gateSecret` is SVC_GATE_SECRET_FILE's secret. */
export interface KubernetesSettings {
  image: string;
  namespace: string | undefined;
  serviceAccount: string | undefined;
  cpu: string | undefined;
  memory: string | undefined;
  repoUrl: string | undefined;
  repoRef: string | undefined;
  repoPvc: string | undefined;
  envSecret: string | undefined;
  controlTokenSecret: string | undefined;
  ttlSeconds: number;
  activeDeadlineSeconds: number;
  source: string;
  keysSecret: string | undefined;
  signerEnvSecret: string | undefined;
  gateUrl: string | undefined;
  gateSecret: Buffer | undefined;
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
    source: settingOr(env, 'SVC_K8S_SOURCE'),
    keysSecret: opt('SVC_K8S_KEYS_SECRET'),
    signerEnvSecret: opt('SVC_K8S_SIGNER_ENV_SECRET'),
    gateUrl: opt('SVC_K8S_GATE_URL'),
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
