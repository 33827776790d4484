// The pod of one Kubernetes job (containers and mounts: docs/deploy.md), split so that only the signer can read the
// runner's signing key; the signer trusts only the sealed base, the pod spec and hash-checked git objects (src/pod/).
// Must not: mount the key, the sealed volume or a service-account token into any container that runs agent code, nor
// SVC_K8S_REPO_PVC's claim writable anywhere (pods share it).
import { mintJobCredential, readGateSecret } from '../gate/job-credential.ts';
import { childEnv, isCredentialName, PROVIDER_KEY_NAMES } from '../spawn/start.ts';
import { operatorPassedEnv, operatorPassedNames } from '../engine/config.ts';
import { isolatedArgs, jobMayFetchIssue, type ExecJob } from './executor.ts';
import { MODEL_APIS, MODEL_KEY_NAMES } from '../gate/model-apis.ts';
import { BadSettingError } from '../errors.ts';
import { setting, settingInt, settingOr, type SettingName } from '../settings-registry.ts';
import { traceSettings } from '../trace.ts';

export const RUN_CONTAINER = 'run';
export const SIGNER_CONTAINER = 'signer';
/**
 * The signer's termination message file (Kubernetes' default path, on no volume: the file is the container's own, so
 * no other container can write it): the job's outcome, which src/cli/pod.ts writes last, and the trigger reads from
 * the pod status' `state.terminated.message` (kubernetes-executor.ts), never from a log.
 */
const SIGNER_OUTCOME_PATH = '/dev/termination-log';
/**
 * What starts the signer's outcome line in its log, as older signers printed it and older triggers read it: kept for
 * this one release, so that Jobs running across an upgrade or a rollback keep their outcome (docs/deploy.md).
 */
export const SIGNER_OUTCOME_MARK = 'svc-signer-outcome ';
/**
 * The most bytes of an outcome: the kubelet cuts each container's message to 12 KiB ÷ the pod's containers, init
 * containers and injected sidecars included (this pod's four, with a mesh's two six): 1536 is eight's share. The
 * trigger shows 300 characters of an error at most.
 */
export const SIGNER_OUTCOME_MAX_BYTES = 1536;
const WORKSPACE = '/workspace/repo';
const PVC_DIR = '/pvc';
const TOKEN_DIR = '/var/run/svc/control-token';
const POD_HOME = '/home/svc';
// The run container's svc start takes the run's handed key from here (SVC_SECRETS_HANDOFF), written by `seal`.
const RUN_KEY_HANDOFF = `${POD_HOME}/.svc/handoff/run-key.json`;
const SEALED_DIR = '/var/run/svc/sealed';
const SIGNER_HOME = '/var/run/svc/signer';
// keys.ts reads the pair from $HOME/.svc/keys; a mounted key is used as is (the folder is read-only, nothing is made).
const SIGNER_KEYS_DIR = `${SIGNER_HOME}/.svc/keys`;

type Mount = { name: string; mountPath: string; readOnly?: boolean };
type EnvVar = { name: string; value: string };
type SecretVar = { name: string; valueFrom: { secretKeyRef: { name: string; key: string; optional: true } } };
/** What the signer takes of SVC_K8S_SIGNER_ENV_SECRET: the pull request's token and its host. */
const SIGNER_SECRET_KEYS = ['GITHUB_TOKEN', 'GH_TOKEN', 'GITHUB_API_URL'];
/** Of the server's checkout only its policy's max_usd goes in: the pod clones its own (deploy.md). */
export type PodJob = Omit<ExecJob, 'workdir' | 'run'> & { maxUsd?: number | null };

export type KubernetesSettings = ReturnType<typeof kubernetesSettingsFromEnv>;

export function kubernetesSettingsFromEnv(env: NodeJS.ProcessEnv) {
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
    repoUrl: repoUrlOf(opt('SVC_K8S_REPO_URL')),
    repoRef: opt('SVC_K8S_REPO_REF'),
    repoPvc: opt('SVC_K8S_REPO_PVC'),
    envSecret: opt('SVC_K8S_ENV_SECRET'),
    controlTokenSecret: opt('SVC_K8S_CONTROL_TOKEN_SECRET'),
    runControlTokenSecret: runTokenSecretOf(
      opt('SVC_K8S_CONTROL_TOKEN_SECRET'), opt('SVC_K8S_RUN_CONTROL_TOKEN_SECRET'),
    ),
    ttlSeconds: settingInt(env, 'SVC_K8S_TTL_SECONDS'),
    activeDeadlineSeconds: settingInt(env, 'SVC_K8S_ACTIVE_DEADLINE_SECONDS'),
    source: settingOr(env, 'SVC_K8S_SOURCE'),
    keysSecret: opt('SVC_K8S_KEYS_SECRET'),
    signerEnvSecret: opt('SVC_K8S_SIGNER_ENV_SECRET'),
    gateUrl: opt('SVC_K8S_GATE_URL'),
    gateSecret: gateSecretOf(opt('SVC_K8S_GATE_URL'), opt('SVC_GATE_SECRET_FILE')),
  };
}

/** The run container's token replaces the shippers' one there, at the same path: alone it would be no pod's, and
 * without it (or the same Secret) the pod's agent would hold the token that stores runs no trigger launched. */
function runTokenSecretOf(control: string | undefined, run: string | undefined): string | undefined {
  if (run !== undefined && control === undefined) {
    throw new BadSettingError('SVC_K8S_RUN_CONTROL_TOKEN_SECRET needs SVC_K8S_CONTROL_TOKEN_SECRET (the seal\'s and ' +
      'the signer\'s token)');
  }
  if (control !== undefined && run === undefined) {
    throw new BadSettingError('SVC_K8S_CONTROL_TOKEN_SECRET needs SVC_K8S_RUN_CONTROL_TOKEN_SECRET (a `bound-runs` ' +
      'runner token for the run container, whose agent can read it: docs/deploy.md "Upgrading")');
  }
  if (control !== undefined && control === run) {
    throw new BadSettingError('SVC_K8S_RUN_CONTROL_TOKEN_SECRET names the Secret SVC_K8S_CONTROL_TOKEN_SECRET names: ' +
      'the run container\'s agent would hold the seal\'s and the signer\'s token (docs/deploy.md "Upgrading")');
  }
  return run;
}

/** A pod's clone URL is in its workspace's git config, which its agent reads: as for a claim's origin, an http(s) URL
 * holds no user info (a token rides as the user name as often as the password), any other URL no password (an ssh user
 * name is the login). Any scheme git clones stays allowed: the pod clones without svc's token. */
function repoUrlOf(url: string | undefined): string | undefined {
  const parsed = url === undefined ? null : URL.parse(url);
  if (parsed && (parsed.password || (parsed.username && /^https?:$/.test(parsed.protocol)))) {
    throw new BadSettingError('SVC_K8S_REPO_URL must hold no password, nor an http(s) user name: the pod keeps it in '
      + 'a git config its agent reads');
  }
  return url;
}

/** The gate refuses pods without a credential: a gate URL needs the secret to mint one. */
function gateSecretOf(gateUrl: string | undefined, file: string | undefined): Buffer | undefined {
  if (gateUrl === undefined) return undefined;
  if (file === undefined) {
    throw new BadSettingError('SVC_K8S_GATE_URL needs SVC_GATE_SECRET_FILE (the secret `svc gate serve` checks with)');
  }
  return readGateSecret(file);
}

/** In the foreground, always in a worktree (the signer diffs commits), under the run id the pod spec fixed. */
export function podArgs(args: readonly string[], runId: string): string[] {
  return [...isolatedArgs(args.at(-1) === '--detach' ? args.slice(0, -1) : args), '--run-id', runId];
}

/** The pod's routes out through the gate (docs/gate.md) with this job's credential, valid until `expires`. */
function gateEnv(
  serverEnv: NodeJS.ProcessEnv, s: KubernetesSettings, job: PodJob, runId: string, expires: number,
): EnvVar[] {
  if (!s.gateUrl || !s.gateSecret) return [];
  const trace = job.traceparent ? { trace: job.traceparent } : {};
  const budget = job.maxUsd ? { maxUsd: job.maxUsd } : {};
  const who = { job: job.id, run: runId, repo: job.repo?.name ?? '', ...trace, ...budget };
  const credential = mintJobCredential(s.gateSecret, who, expires);
  const gate = s.gateUrl.replace(/\/+$/, '');
  const control = URL.parse(serverEnv.SVC_CONTROL_URL ?? '')?.hostname ?? '';
  const direct = ['localhost', '127.0.0.1', new URL(gate).hostname, ...(control ? [control] : [])].join(',');
  const proxy = gate.replace(/^http:\/\//, `http://svc:${credential}@`);
  const vars: EnvVar[] = ['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy']
    .map((name) => ({ name, value: proxy }));
  vars.push({ name: 'NO_PROXY', value: direct }, { name: 'no_proxy', value: direct });
  vars.push({ name: 'NODE_USE_ENV_PROXY', value: '1' });
  for (const [name, api] of Object.entries(MODEL_APIS)) {
    if (api.baseEnv) vars.push({ name: api.baseEnv, value: `${gate}/_job/${credential}/_model/${name}` });
  }
  vars.push({ name: 'SVC_GATE_EVIDENCE_URL', value: `${gate}/_job/${credential}/_egress` });
  // The gate holds the collector's headers and passes on only this job's trace.
  if (traceSettings(serverEnv, '').url) {
    vars.push({ name: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', value: `${gate}/_job/${credential}/_traces` });
  }
  for (const api of Object.values(MODEL_APIS)) {
    for (const variable of api.env) vars.push({ name: variable, value: api.placeholder });
  }
  return vars;
}

/** The trigger's allowlisted, non-secret variables, minus what names a trigger-host path or source, or gateEnv sets. */
function baseEnv(
  serverEnv: NodeJS.ProcessEnv, s: KubernetesSettings, job: PodJob, home: string, gate: readonly EnvVar[],
): EnvVar[] {
  const env = Object.entries(childEnv('launcher', serverEnv))
    .filter(([k]) => !['PATH', 'HOME', 'TMPDIR', 'SVC_SOURCE', 'SVC_CONTROL_ANSWER_DIR', 'SVC_REPO_NAME'].includes(k))
    .filter(([k]) => !gate.some((g) => g.name === k))
    .map(([k, v]) => ({ name: k, value: String(v) }));
  env.push({ name: 'HOME', value: home }, { name: 'TMPDIR', value: '/tmp' }, { name: 'SVC_SOURCE', value: s.source });
  if (job.origin) env.push({ name: 'SVC_ORIGIN', value: job.origin });
  if (job.repo) env.push({ name: 'SVC_REPO_NAME', value: job.repo.name });
  if (job.traceparent) env.push({ name: 'SVC_TRACEPARENT', value: job.traceparent });
  if (s.controlTokenSecret) env.push({ name: 'SVC_CONTROL_TOKEN_FILE', value: `${TOKEN_DIR}/token` });
  // The pod is the agent's boundary; bwrap would need user namespaces pods seldom have. Never a repository's choice.
  if (!env.some((e) => e.name === 'SVC_SERVER_SANDBOX')) env.push({ name: 'SVC_SERVER_SANDBOX', value: 'none' });
  env.push(...gate);
  return env;
}

/**
 * The names the operator passes to agents (operator.json "env"), as the local executor passes them to its jobs: the
 * trigger's own values, written into the Job manifest, which whoever may read Jobs reads, so never a secret's or an
 * SVC_ name (passedValues), a credential's (operatorCredentials), a provider key, under the API's name or a CLI's
 * (model-apis.ts; those come from SVC_K8S_ENV_SECRET or the gate), nor one the pod sets itself (its home, the gate's).
 */
function operatorEnv(serverEnv: NodeJS.ProcessEnv, set: readonly EnvVar[]): EnvVar[] {
  const own = ['PATH', 'HOME', 'TMPDIR', ...MODEL_KEY_NAMES];
  return Object.entries(operatorPassedEnv(serverEnv))
    .filter(([name]) => !own.includes(name) && !isCredentialName(name) && !set.some((e) => e.name === name))
    .map(([name, value]) => ({ name, value }));
}

/**
 * The operator's passed names that hold a credential (a CLI's login, say), taken from SVC_K8S_ENV_SECRET by name
 * whether or not the trigger holds one; with or without a gate, as a local run passes what the operator names.
 */
function operatorCredentials(serverEnv: NodeJS.ProcessEnv): string[] {
  return operatorPassedNames(serverEnv).filter((name) => isCredentialName(name) && !MODEL_KEY_NAMES.includes(name));
}

/** Named keys of an operator's Secret, each the variable of its name; a key it lacks is no variable. */
function secretVars(secret: string | undefined, keys: readonly string[]): SecretVar[] {
  if (!secret) return [];
  return keys.map((key) => ({ name: key, valueFrom: { secretKeyRef: { name: secret, key, optional: true } } }));
}

/**
 * What the run container takes of SVC_K8S_ENV_SECRET: only what this job's run uses, since the agent can read all
 * the container holds (DESIGN §7a). The provider keys only without a gate (which holds them; the container gets
 * placeholders); the credentials the operator passes; an issue tracker's credential only for a job that may fetch its
 * issue with it.
 */
function runSecretKeys(job: PodJob, gated: boolean, serverEnv: NodeJS.ProcessEnv): string[] {
  return [
    ...(gated ? [] : PROVIDER_KEY_NAMES),
    ...operatorCredentials(serverEnv),
    ...(jobMayFetchIssue('errtrack', job) ? ['ERRTRACK_AUTH_TOKEN', 'ERRTRACK_URL'] : []),
    ...(jobMayFetchIssue('trackera', job) ? ['TRACKERA_API_KEY', 'TRACKERA_API_URL'] : []),
  ];
}

type Workspace = { clone: string; ref: string | undefined } | { pvc: string } | null;

// The claim's repository ($1), copied (committed HEAD only) into the pod's own workspace ($2): pods run side by side,
// and a shared writable checkout would hand one pod's agent another's run key and worktree (docs/control-data.md).
// The copy keeps the claim's origin, where the seal sends a pull request, and a claim without one gives none; the
// origin is the claim's text, so `--` keeps one starting with "-" from reading as an option. A claim is often
// written by another uid than the pod's: git reads it only as a safe.directory (else the clone fails and the origin
// read finds none, quietly), and the clone's upload-pack takes that only from a global config (`-c` is not passed on).
// The origin goes into the workspace's config, which the agent reads: an http(s) origin without its user info (a token
// rides as the user name as often as the password), any other without a password (an ssh user name is the login, kept),
// and none with a query or fragment, where tokens ride too, even after a host without a path. The seal pushes with
// svc's own token. A `user@host:path` origin holds only a login, and is kept as it is.
const PVC_COPY = [
  'set -e',
  'trust=$(mktemp)',
  // Gone from the pod's /tmp whatever step fails (set -e).
  'trap \'rm -f "$trust"\' EXIT',
  'printf \'[safe]\\n\\tdirectory = %s\\n\\tdirectory = %s/.git\\n\' "$1" "$1" > "$trust"',
  'export GIT_CONFIG_GLOBAL="$trust"',
  'git clone --no-hardlinks -- "$1" "$2"',
  'git -C "$2" remote remove origin',
  'if url=$(git -C "$1" config --get remote.origin.url); then',
  '  case "$url" in *://*)',
  '    scheme=${url%%://*}; rest=${url#*://}; authority=${rest%%/*}; path=${rest#"$authority"}',
  '    case "$authority" in *[?#]*) authority=${authority%%[?#]*}; path=;; esac',
  '    host=${authority##*@}',
  '    case "$scheme:$authority" in [Hh][Tt][Tt][Pp]:*|[Hh][Tt][Tt][Pp][Ss]:*) ;;',
  '      *@*) login=${authority%@*}; host=${login%%:*}@$host;; esac',
  '    url=$scheme://$host${path%%[?#]*};; esac',
  '  git -C "$2" remote add -- origin "$url"',
  'fi',
].join('\n');

/** The entry's clone URL, else SVC_K8S_REPO_PVC, else SVC_K8S_REPO_URL at its ref, else the image's own files. */
function workspaceOf(job: PodJob, s: KubernetesSettings): Workspace {
  if (job.repo?.clone) return { clone: job.repo.clone, ref: undefined };
  if (s.repoPvc) return { pvc: s.repoPvc };
  if (s.repoUrl) return { clone: s.repoUrl, ref: s.repoRef };
  return null;
}

function volumesOf(s: KubernetesSettings, from: Workspace): Array<Record<string, unknown>> {
  const volumes: Array<Record<string, unknown>> = ['workspace', 'home', 'tmp', 'sealed', 'signer-home', 'signer-tmp']
    .map((name) => ({ name, emptyDir: {} }));
  if (from && 'pvc' in from) {
    volumes.push({ name: 'repo-pvc', persistentVolumeClaim: { claimName: from.pvc, readOnly: true } });
  }
  if (s.controlTokenSecret) {
    volumes.push({ name: 'control-token', secret: { secretName: s.controlTokenSecret, defaultMode: 0o400 } });
  }
  if (s.runControlTokenSecret) {
    volumes.push({ name: 'run-control-token', secret: { secretName: s.runControlTokenSecret, defaultMode: 0o400 } });
  }
  // This runner's key, whose public half the Control Plane has registered (keys/trusted/).
  if (s.keysSecret) volumes.push({ name: 'signing-key', secret: { secretName: s.keysSecret, defaultMode: 0o400 } });
  return volumes;
}

function resourcesOf(s: KubernetesSettings): Record<string, unknown> | undefined {
  if (!s.cpu && !s.memory) return undefined;
  const memory = s.memory ? { memory: s.memory } : {};
  return { requests: { ...(s.cpu ? { cpu: s.cpu } : {}), ...memory }, limits: { ...memory } };
}

export function buildPodSpec(
  job: PodJob, s: KubernetesSettings, serverEnv: NodeJS.ProcessEnv, runId: string,
): Record<string, unknown> {
  const security = { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };
  const container = (name: string, spec: Record<string, unknown>) => (
    { name, image: s.image, ...spec, securityContext: security }
  );
  const resources = resourcesOf(s);
  const token: Mount[] = s.controlTokenSecret ? [{ name: 'control-token', mountPath: TOKEN_DIR, readOnly: true }] : [];
  // The agent's container holds a `bound-runs` token where one is given: it writes only the run the seal stored.
  const runToken: Mount[] = s.runControlTokenSecret
    ? [{ name: 'run-control-token', mountPath: TOKEN_DIR, readOnly: true }] : token;
  const workspace: Mount = { name: 'workspace', mountPath: WORKSPACE };
  const from = workspaceOf(job, s);
  // When the pod is surely over: its Job's deadline (activeDeadlineSeconds counts from the Job's start, after this)
  // plus 10 minutes for clocks and a slow end. Its gate credential expires then, and its run's lease ends then.
  const overAt = Date.now() + (s.activeDeadlineSeconds + 600) * 1000;
  const gate = gateEnv(serverEnv, s, job, runId, overAt);
  const clone = from
    ? [container('clone', {
        command: 'clone' in from
          ? ['git', 'clone', '--depth', '50', ...(from.ref ? ['--branch', from.ref] : []), '--', from.clone, WORKSPACE]
          : ['sh', '-c', PVC_COPY, 'sh', PVC_DIR, WORKSPACE],
        env: [{ name: 'HOME', value: POD_HOME }, ...gate],
        volumeMounts: [workspace, { name: 'home', mountPath: POD_HOME }, { name: 'tmp', mountPath: '/tmp' },
          ...('pvc' in from ? [{ name: 'repo-pvc', mountPath: PVC_DIR, readOnly: true }] : [])],
      })]
    : [];
  // Before any agent code runs: what the signer will diff against and push to, and the run's key (the run container
  // gets only the key handed from it, in its home). It also stores the run bound to the handed key, so the agent
  // cannot be the first to store it, with the lease past which the Control Plane ends it should the pod die unheard.
  const seal = container('seal', {
    args: ['pod', 'seal', '--repo', WORKSPACE, '--sealed', SEALED_DIR, '--handoff', RUN_KEY_HANDOFF, '--run-id', runId],
    env: [...baseEnv(serverEnv, s, job, SEALED_DIR, gate),
      { name: 'SVC_RUN_LEASE_UNTIL', value: new Date(overAt).toISOString() }],
    volumeMounts: [
      { ...workspace, readOnly: true },
      { name: 'sealed', mountPath: SEALED_DIR },
      { name: 'home', mountPath: POD_HOME },
      ...token,
    ],
  });
  const runEnv = [
    ...baseEnv(serverEnv, s, job, POD_HOME, gate), { name: 'SVC_SIGN_LATER', value: '1' },
    { name: 'SVC_SECRETS_HANDOFF', value: RUN_KEY_HANDOFF },
  ];
  const run = container(RUN_CONTAINER, {
    args: podArgs(job.args, runId),
    workingDir: WORKSPACE,
    env: [
      ...runEnv, ...operatorEnv(serverEnv, runEnv),
      ...secretVars(s.envSecret, runSecretKeys(job, !!s.gateUrl, serverEnv)),
    ],
    ...(resources ? { resources } : {}),
    volumeMounts: [workspace, { name: 'home', mountPath: POD_HOME }, { name: 'tmp', mountPath: '/tmp' }, ...runToken],
  });
  const signer = container(SIGNER_CONTAINER, {
    // Everything the signer trusts comes from here (run id, PR wish), not from files the run wrote.
    args: ['pod', 'sign', '--run-id', runId, '--repo', WORKSPACE, '--sealed', SEALED_DIR,
      '--outcome', SIGNER_OUTCOME_PATH, ...(job.args.includes('--pr') ? ['--pr'] : [])],
    // Only the file: FallbackToLogsOnError would take a failed signer's log, where an error may quote the agent.
    terminationMessagePath: SIGNER_OUTCOME_PATH,
    terminationMessagePolicy: 'File',
    workingDir: SIGNER_HOME,
    // It runs no provider and fetches no issue: of the operator's Secrets only the pull request's token.
    env: [...baseEnv(serverEnv, s, job, SIGNER_HOME, gate), ...secretVars(s.signerEnvSecret, SIGNER_SECRET_KEYS)],
    ...(resources ? { resources } : {}),
    volumeMounts: [
      { ...workspace, readOnly: true },
      { name: 'sealed', mountPath: SEALED_DIR, readOnly: true },
      { name: 'signer-home', mountPath: SIGNER_HOME },
      { name: 'signer-tmp', mountPath: '/tmp' },
      ...token,
      ...(s.keysSecret ? [{ name: 'signing-key', mountPath: SIGNER_KEYS_DIR, readOnly: true }] : []),
    ],
  });
  return {
    restartPolicy: 'Never',
    ...(s.serviceAccount ? { serviceAccountName: s.serviceAccount } : {}),
    // No container gets an API token (the run's code could use one to read the key Secret), nor sees another's
    // processes (their /proc/<pid>/root would reach the signer's mounts).
    automountServiceAccountToken: false,
    shareProcessNamespace: false,
    securityContext: {
      runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001,
      seccompProfile: { type: 'RuntimeDefault' },
    },
    initContainers: [...clone, seal, run],
    containers: [signer],
    volumes: volumesOf(s, from),
  };
}
