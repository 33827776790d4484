import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  mkdirSync, writeFileSync, rmSync, symlinkSync, unlinkSync, existsSync, readdirSync, readFileSync,
} from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import {
  buildKubeJob, createKubernetesExecutor, kubeJobName, LABEL_RUN,
} from '../../src/trigger/kubernetes-executor.ts';
import { outcomeMessage } from '../../src/cli/pod.ts';
import { kubernetesSettingsFromEnv, podArgs } from '../../src/trigger/kubernetes-pod.ts';
import { createLogger, silentLogger } from '../../src/log.ts';
import { verifyJobCredential } from '../../src/gate/job-credential.ts';
import { handedRunKey, newRunId, newRunKey } from '../../src/engine/ids.ts';
import { BadSettingError } from '../../src/errors.ts';
import { startKubeStandIn, podSecrets, type KubeStandIn } from './kube-stand-in.ts';
import { startTestTrigger, tempDir, makeRepo, post, get, SECRETS, type TestTrigger } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';

const dir = tempDir();

function runContainer(pod: any): any {
  return pod.initContainers.find((c: { name: string }) => c.name === 'run');
}

/** The clone container's `sh -c` arguments with the claim's and the workspace's mount paths swapped for these. */
function cloneArgv(pod: any, claim: string, workspace: string): string[] {
  const command = pod.initContainers[0].command as string[];
  assert.equal(command[0], 'sh');
  const mounts: Record<string, string> = { '/pvc': claim, '/workspace/repo': workspace };
  return command.slice(1).map((a) => mounts[a] ?? a);
}

function runIdOf(pod: any): string {
  const args = pod.containers[0].args as string[];
  return args[args.indexOf('--run-id') + 1]!;
}
const saDir = join(dir, 'serviceaccount');
let kube: KubeStandIn;
let env: NodeJS.ProcessEnv;
let seq = 0;

function jobId(): string {
  seq += 1;
  return `j0000000000test${String(seq).padStart(12, '0')}`;
}

function executor(extra: Partial<Parameters<typeof createKubernetesExecutor>[0]> = {}) {
  return createKubernetesExecutor({ env, log: silentLogger, pollMs: 10, launchTimeoutMs: 10_000, shipGraceMs: 0, ...extra });
}

before(async () => {
  mkdirSync(saDir, { recursive: true });
  writeFileSync(join(saDir, 'token'), 'sa-token-123\n');
  writeFileSync(join(saDir, 'namespace'), 'build\n');
  kube = await startKubeStandIn(join(dir, 'pods'));
  env = {
    // The trigger host's own source: pods must not inherit it (they get SVC_K8S_SOURCE, default k8s).
    PATH: process.env.PATH, HOME: dir, SVC_SOURCE: 'local',
    SVC_K8S_API_URL: kube.url, SVC_K8S_SA_DIR: saDir, SVC_K8S_IMAGE: 'registry.test/svc:1',
    SVC_K8S_SERVICE_ACCOUNT: 'svc-runner', SVC_K8S_CPU: '500m', SVC_K8S_MEMORY: '1Gi',
  };
});
after(async () => {
  await kube.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('buildKubeJob', () => {
  const settings = () => kubernetesSettingsFromEnv({ ...env, SVC_K8S_REPO_URL: 'https://git.test/acme/api.git', SVC_K8S_CONTROL_TOKEN_SECRET: 'svc-control', SVC_K8S_RUN_CONTROL_TOKEN_SECRET: 'svc-control-run' });

  it('runs svc start in the foreground, in a worktree, under the run id of the pod spec', () => {
    assert.deepEqual(podArgs(['start', '--brief', '--detach', '--pr', '--detach'], 'r1'), ['start', '--brief', '--detach', '--pr', '--run-id', 'r1']);
    assert.deepEqual(podArgs(['start', 'x'], 'r2'), ['start', 'x', '--worktree', '--run-id', 'r2']);
  });

  it('sets image, namespace, service account, resources and never retries the pod', () => {
    const job = buildKubeJob({ id: 'j01ABC', args: ['start', 'x', '--detach'] }, settings(), 'build', env) as any;
    assert.equal(job.metadata.name, 'svc-j01abc');
    assert.equal(job.metadata.namespace, 'build');
    assert.equal(job.spec.backoffLimit, 0);
    const pod = job.spec.template.spec;
    assert.equal(pod.restartPolicy, 'Never');
    assert.equal(pod.serviceAccountName, 'svc-runner');
    assert.equal(pod.automountServiceAccountToken, false);
    assert.deepEqual(pod.initContainers.map((c: { name: string }) => c.name), ['clone', 'seal', 'run']);
    assert.deepEqual(pod.containers.map((c: { name: string }) => c.name), ['signer']);
    const run = pod.initContainers[2];
    assert.equal(run.image, 'registry.test/svc:1');
    assert.deepEqual(run.args, ['start', 'x', '--worktree', '--run-id', runIdOf(pod)]);
    assert.deepEqual(run.resources, { requests: { cpu: '500m', memory: '1Gi' }, limits: { memory: '1Gi' } });
    assert.deepEqual(pod.initContainers[0].command, ['git', 'clone', '--depth', '50', '--', 'https://git.test/acme/api.git', '/workspace/repo']);
  });

  it('gives the pod no trigger secret: allowlisted variables plus a mounted Control Plane token file', () => {
    const serverEnv = { ...env, ...SECRETS, SVC_CONTROL_TOKEN: 'cp-token-secret', SVC_CONTROL_URL: 'http://svc-control:47821' };
    const job = buildKubeJob({ id: 'j1', args: ['start', 'x'] }, settings(), 'build', serverEnv);
    const text = JSON.stringify(job);
    for (const value of [...Object.values(SECRETS), 'cp-token-secret', 'sa-token-123']) assert.ok(!text.includes(value), `secret ${value} reached the Job`);
    const pod = (job as any).spec.template.spec;
    const names = runContainer(pod).env.map((e: { name: string }) => e.name).sort();
    assert.deepEqual(names, ['HOME', 'SVC_CONTROL_TOKEN_FILE', 'SVC_CONTROL_URL', 'SVC_SECRETS_HANDOFF', 'SVC_SERVER_SANDBOX', 'SVC_SIGN_LATER', 'SVC_SOURCE', 'TMPDIR']);
    assert.deepEqual(pod.containers[0].env.map((e: { name: string }) => e.name).sort(), ['HOME', 'SVC_CONTROL_TOKEN_FILE', 'SVC_CONTROL_URL', 'SVC_SERVER_SANDBOX', 'SVC_SOURCE', 'TMPDIR']);
  });

  // The run container is where the agent runs unsandboxed: its token may only write the run the seal stored
  // (a `bound-runs` runner token, docs/deploy.md "Receipts from pods"); seal and signer keep the token that stores runs.
  it('mounts SVC_K8S_RUN_CONTROL_TOKEN_SECRET for the run container instead of the seal\'s and signer\'s token', () => {
    const e = { ...env, SVC_K8S_CONTROL_TOKEN_SECRET: 'svc-control', SVC_K8S_RUN_CONTROL_TOKEN_SECRET: 'svc-control-run' };
    const pod = (buildKubeJob({ id: 'j1', args: ['start', 'x'] }, kubernetesSettingsFromEnv(e), 'build', e) as any).spec.template.spec;
    const secretOf = (volume: string) => pod.volumes.find((v: { name: string }) => v.name === volume)?.secret?.secretName;
    const tokenMounts = (c: { volumeMounts: Array<{ name: string; mountPath: string }> }) => c.volumeMounts
      .filter((m) => m.mountPath === '/var/run/svc/control-token').map((m) => secretOf(m.name));
    const containers = [...pod.initContainers, ...pod.containers];
    assert.deepEqual(containers.map((c: any) => [c.name, tokenMounts(c)]),
      [['seal', ['svc-control']], ['run', ['svc-control-run']], ['signer', ['svc-control']]]);
    // Alone, it is no pod's.
    assert.throws(() => kubernetesSettingsFromEnv({ ...env, SVC_K8S_RUN_CONTROL_TOKEN_SECRET: 'svc-control-run' }),
      /SVC_K8S_RUN_CONTROL_TOKEN_SECRET needs SVC_K8S_CONTROL_TOKEN_SECRET/);
  });

  // Closed by default: a trigger left with one pod token would hand the agent the token that stores runs.
  it('refuses SVC_K8S_CONTROL_TOKEN_SECRET without SVC_K8S_RUN_CONTROL_TOKEN_SECRET, or naming the same Secret', () => {
    for (const run of [undefined, 'svc-control']) {
      const e = { ...env, SVC_K8S_CONTROL_TOKEN_SECRET: 'svc-control', SVC_K8S_RUN_CONTROL_TOKEN_SECRET: run };
      assert.throws(() => kubernetesSettingsFromEnv(e), (err: Error) => err instanceof BadSettingError &&
        /SVC_K8S_RUN_CONTROL_TOKEN_SECRET/.test(err.message) && /docs\/deploy\.md "Upgrading"/.test(err.message));
    }
  });

  it('hands the pod the job\'s span and the trace export settings, never the export headers (a secret)', () => {
    const serverEnv = { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_HEADERS: 'api-key=otel-secret-9' };
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const job = buildKubeJob({ id: 'j1', args: ['start', 'x'], traceparent }, settings(), 'build', serverEnv);
    assert.ok(!JSON.stringify(job).includes('otel-secret-9'));
    const vars = runContainer((job as any).spec.template.spec).env as Array<{ name: string; value: string }>;
    assert.equal(vars.find((v) => v.name === 'SVC_TRACEPARENT')?.value, traceparent);
    assert.equal(vars.find((v) => v.name === 'OTEL_EXPORTER_OTLP_ENDPOINT')?.value, 'http://collector:4318');
  });

  it('behind a gate, the pod exports its spans through it, and its gate credential names the job\'s span', () => {
    const secret = join(dir, 'gate-secret');
    writeFileSync(secret, 'kube-trace-gate-secret-0123456789abcdef');
    const serverEnv = { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/t',
      SVC_K8S_GATE_URL: 'http://svc-gate:3128', SVC_GATE_SECRET_FILE: secret };
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const job = buildKubeJob({ id: 'j1', args: ['start', 'x'], traceparent }, kubernetesSettingsFromEnv(serverEnv), 'build', serverEnv);
    const vars = runContainer((job as any).spec.template.spec).env as Array<{ name: string; value: string }>;
    const exports = vars.filter((v) => v.name === 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
    assert.equal(exports.length, 1);
    const credential = /^http:\/\/svc-gate:3128\/_job\/([^/]+)\/_traces$/.exec(exports[0]!.value)?.[1];
    assert.ok(credential, exports[0]!.value);
    const who = verifyJobCredential(Buffer.from('kube-trace-gate-secret-0123456789abcdef'), credential);
    assert.equal(who?.trace, traceparent);
    assert.equal(vars.find((v) => v.name === 'SVC_TRACEPARENT')?.value, traceparent);
  });

  it('gives pods their own run source, SVC_K8S_SOURCE or k8s, never the trigger host\'s', () => {
    const pod = (e: NodeJS.ProcessEnv) => (buildKubeJob({ id: 'j2', args: ['start', 'x'] }, kubernetesSettingsFromEnv(e), 'build', e) as any).spec.template.spec;
    const sourceOf = (e: NodeJS.ProcessEnv) => runContainer(pod(e)).env.filter((v: { name: string }) => v.name === 'SVC_SOURCE').map((v: { value: string }) => v.value);
    assert.deepEqual(sourceOf({ ...env, SVC_SOURCE: 'local' }), ['k8s']);
    assert.deepEqual(sourceOf({ ...env, SVC_K8S_SOURCE: 'cluster-a' }), ['cluster-a']);
    assert.throws(() => kubernetesSettingsFromEnv({ ...env, SVC_K8S_SOURCE: '../x' }), /SVC_K8S_SOURCE/);
    const names = runContainer(pod({ ...env, SVC_CONTROL_ANSWER_DIR: '/var/lib/svc/control/answers' })).env.map((v: { name: string }) => v.name);
    assert.equal(names.includes('SVC_CONTROL_ANSWER_DIR'), false, 'a trigger-host path means nothing in the pod');
  });

  it('mounts the runner key from SVC_K8S_KEYS_SECRET in the signer container only, never where agent code runs', () => {
    const e = { ...env, SVC_K8S_REPO_URL: 'https://git.test/acme/api.git', SVC_K8S_KEYS_SECRET: 'svc-signing-key', SVC_K8S_ENV_SECRET: 'provider-keys' };
    const pod = (buildKubeJob({ id: 'j3', args: ['start', 'x', '--pr'] }, kubernetesSettingsFromEnv(e), 'build', e) as any).spec.template.spec;
    assert.deepEqual(pod.volumes.find((v: { name: string }) => v.name === 'signing-key'), { name: 'signing-key', secret: { secretName: 'svc-signing-key', defaultMode: 0o400 } });
    const all = [...pod.initContainers, ...pod.containers];
    const withKey = all.filter((c) => c.volumeMounts.some((m: { name: string }) => m.name === 'signing-key')).map((c) => c.name);
    assert.deepEqual(withKey, ['signer']);
    assert.deepEqual(pod.containers[0].volumeMounts.find((m: { name: string }) => m.name === 'signing-key'), { name: 'signing-key', mountPath: '/var/run/svc/signer/.svc/keys', readOnly: true });
    const run = runContainer(pod);
    const runText = JSON.stringify(run);
    for (const word of ['signing-key', 'svc-signing-key', '/var/run/svc/signer', 'sealed', 'receipt-ed25519']) {
      assert.ok(!runText.includes(word), `the run container must not name ${word}`);
    }
    // Of SVC_K8S_ENV_SECRET it takes the provider keys (no gate); nothing else names a key.
    const own = run.env.filter((v: any) => v.valueFrom?.secretKeyRef.name !== 'provider-keys');
    assert.equal(own.some((v: { name: string }) => /KEY|SIGN(?!_LATER)/.test(v.name)), false);
    // The seal the signer trusts is written before the agent runs, and the run container never mounts it.
    assert.deepEqual(all.filter((c) => c.volumeMounts.some((m: { name: string }) => m.name === 'sealed')).map((c) => [c.name, c.volumeMounts.find((m: { name: string }) => m.name === 'sealed').readOnly ?? false]), [['seal', false], ['signer', true]]);
    // The run's key is made there too; the run container gets only the key handed from it, in a file of its home.
    const seal = pod.initContainers.find((c: { name: string }) => c.name === 'seal');
    const handoff = '/home/svc/.svc/handoff/run-key.json';
    assert.deepEqual(seal.args, ['pod', 'seal', '--repo', '/workspace/repo', '--sealed', '/var/run/svc/sealed', '--handoff', handoff, '--run-id', runIdOf(pod)]);
    assert.ok(seal.volumeMounts.some((m: { name: string; mountPath: string }) => m.name === 'home' && m.mountPath === '/home/svc'));
    assert.equal(run.env.find((v: { name: string }) => v.name === 'SVC_SECRETS_HANDOFF')?.value, handoff);
    assert.equal(pod.containers[0].env.some((v: { name: string }) => v.name === 'SVC_SECRETS_HANDOFF'), false);
    assert.equal(pod.containers[0].volumeMounts.find((m: { name: string }) => m.name === 'workspace').readOnly, true);
    assert.deepEqual(pod.containers[0].args, ['pod', 'sign', '--run-id', runIdOf(pod), '--repo', '/workspace/repo', '--sealed', '/var/run/svc/sealed', '--outcome', '/dev/termination-log', '--pr']);
    // No Kubernetes API token in any container, and no container sees another's processes.
    assert.equal(pod.automountServiceAccountToken, false);
    assert.equal(pod.shareProcessNamespace, false);
    assert.equal(all.some((c) => c.volumeMounts.some((m: { mountPath: string }) => m.mountPath.startsWith('/var/run/secrets'))), false);
    const without = (buildKubeJob({ id: 'j4', args: ['start', 'x'] }, kubernetesSettingsFromEnv(env), 'build', env) as any).spec.template.spec;
    assert.equal(without.volumes.some((v: { name: string }) => v.name === 'signing-key'), false);
  });

  // DESIGN §7a: a job pod acts only with its own authority. The agent can read all the run container holds.
  it('gives each container only the named keys its job needs, never a whole Secret', () => {
    const gateSecret = join(dir, 'gate-secret-keys');
    writeFileSync(gateSecret, 'kube-keys-gate-secret-0123456789abcdef');
    const e = { ...env, SVC_K8S_ENV_SECRET: 'operator-env', SVC_K8S_SIGNER_ENV_SECRET: 'github-token' };
    const gated = { ...e, SVC_K8S_GATE_URL: 'http://svc-gate:3128', SVC_GATE_SECRET_FILE: gateSecret };
    const podOf = (settingsEnv: NodeJS.ProcessEnv, job: { origin?: string; args: string[] }) =>
      (buildKubeJob({ id: 'j5', ...job }, kubernetesSettingsFromEnv(settingsEnv), 'build', settingsEnv) as any).spec.template.spec;
    /** Secret → the keys a container takes of it. */
    const keysOf = (c: any) => {
      const keys: Record<string, string[]> = {};
      for (const v of c.env) {
        const ref = v.valueFrom?.secretKeyRef;
        if (!ref) continue;
        assert.deepEqual([ref.key, ref.optional], [v.name, true]);
        (keys[ref.name] ??= []).push(ref.key);
      }
      return keys;
    };
    const providers = ['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'GEMINI_API_KEY', 'GOOGLE_API_KEY', 'OPENROUTER_API_KEY',
      'GROQ_API_KEY', 'MISTRAL_API_KEY', 'DEEPSEEK_API_KEY', 'XAI_API_KEY'];
    const issue = 'https://acme.sentry.io/issues/42/';
    const pod = podOf(e, { origin: 'jobs', args: ['start', '--brief', issue, '--pr'] });
    for (const c of [...pod.initContainers, ...pod.containers]) assert.equal(c.envFrom, undefined, c.name);
    assert.deepEqual(keysOf(runContainer(pod)), { 'operator-env': providers });
    assert.deepEqual(keysOf(pod.containers[0]), { 'github-token': ['GITHUB_TOKEN', 'GH_TOKEN', 'GITHUB_API_URL'] });
    for (const c of pod.initContainers.filter((c: any) => c.name !== 'run')) assert.deepEqual(keysOf(c), {}, c.name);
    // Behind a gate the provider keys are its own: the run container holds placeholders, and nothing of the Secret.
    assert.deepEqual(keysOf(runContainer(podOf(gated, { origin: 'jobs', args: ['start', '--brief', 'x'] }))), {});
    // The errtrack token only where the job's input is an issue URL its origin may fetch; trackera's likewise.
    const errtrack = ['ERRTRACK_AUTH_TOKEN', 'ERRTRACK_URL'];
    assert.deepEqual(keysOf(runContainer(podOf(gated, { origin: 'errtrack', args: ['start', issue, '--pr'] }))), { 'operator-env': errtrack });
    assert.deepEqual(keysOf(runContainer(podOf(gated, { origin: 'errtrack', args: ['start', 'Fix errtrack A-1: boom', '--pr'] }))), {});
    assert.deepEqual(keysOf(runContainer(podOf(gated, { origin: 'chata', args: ['start', issue] }))), {});
    assert.deepEqual(keysOf(runContainer(podOf(gated, { origin: 'trackera', args: ['start', 'trackera:ENG-7'] }))),
      { 'operator-env': ['TRACKERA_API_KEY', 'TRACKERA_API_URL'] });
    assert.ok(!JSON.stringify(pod.initContainers).includes('github-token'));
  });

  // As the local executor does for its jobs: the operator's passed names, from the trigger's values, never a secret's.
  it('gives the run container the names the operator passes to agents (operator.json "env"), never a secret', () => {
    const home = join(dir, 'operator-home');
    mkdirSync(join(home, '.svc'), { recursive: true });
    // CODEX_API_KEY, AIDER_API_KEY: model keys under a CLI's own name, a list for aider (src/gate/model-apis.ts),
    // provider keys as much as the others.
    const passed = ['ANTHROPIC_MODEL', 'GIT_AUTHOR_NAME', 'CLAUDE_CODE_MAX_OUTPUT_TOKENS', 'ANTHROPIC_API_KEY', 'HOME',
      'CODEX_API_KEY', 'AIDER_API_KEY'];
    writeFileSync(join(home, '.svc', 'operator.json'), JSON.stringify({ env: passed }));
    const e = { ...env, HOME: home, ANTHROPIC_MODEL: 'claude-test', GIT_AUTHOR_NAME: 'Svc Bot',
      CLAUDE_CODE_MAX_OUTPUT_TOKENS: '4096', ANTHROPIC_API_KEY: 'sk-trigger-secret', CODEX_API_KEY: 'sk-trigger-secret',
      AIDER_API_KEY: '[gemini=sk-trigger-secret]' };
    const pod = (buildKubeJob({ id: 'j6', args: ['start', 'x'] }, kubernetesSettingsFromEnv(e), 'build', e) as any).spec.template.spec;
    const run = runContainer(pod);
    const value = (name: string) => run.env.filter((v: any) => v.name === name).map((v: any) => v.value);
    assert.deepEqual([value('ANTHROPIC_MODEL'), value('GIT_AUTHOR_NAME'), value('CLAUDE_CODE_MAX_OUTPUT_TOKENS')],
      [['claude-test'], ['Svc Bot'], ['4096']]);
    assert.deepEqual(value('HOME'), ['/home/svc'], 'the pod\'s own home, once');
    assert.ok(!JSON.stringify(pod).includes('sk-trigger-secret'), 'no secret of the trigger\'s');
    assert.ok(!JSON.stringify(pod).includes('AIDER_API_KEY'), 'aider\'s list neither: each key has its placeholder');
    for (const c of [...pod.initContainers, ...pod.containers].filter((c: any) => c.name !== 'run')) {
      assert.ok(!c.env.some((v: any) => v.name === 'ANTHROPIC_MODEL'), c.name);
    }
  });

  it('copies SVC_K8S_REPO_PVC into each pod\'s own emptyDir workspace, never mounting the claim writable', () => {
    const e = { ...env, SVC_K8S_REPO_PVC: 'repo-claim' };
    const settings = kubernetesSettingsFromEnv(e);
    const podOf = (id: string) => (buildKubeJob({ id, args: ['start', 'x'] }, settings, 'build', e) as any)
      .spec.template.spec;
    const claim = makeRepo();
    // What an earlier pod could have left on the claim: another run's key, which no pod may see.
    mkdirSync(join(claim, '.svc', 'runs', 'r0other'), { recursive: true });
    writeFileSync(join(claim, '.svc', 'runs', 'r0other', 'run-key'), 'other-run-key');
    const git = (cwd: string, ...args: string[]) => spawnSync('git', args, { cwd, encoding: 'utf8' }).stdout.trim();
    const copyEnv = { PATH: process.env.PATH, HOME: dir };
    for (const id of ['j6a', 'j6b']) {
      const pod = podOf(id);
      const workspaceVolume = pod.volumes.find((v: { name: string }) => v.name === 'workspace');
      assert.deepEqual(workspaceVolume, { name: 'workspace', emptyDir: {} });
      const claims = pod.volumes.filter((v: { persistentVolumeClaim?: unknown }) => v.persistentVolumeClaim);
      assert.deepEqual(claims,
        [{ name: 'repo-pvc', persistentVolumeClaim: { claimName: 'repo-claim', readOnly: true } }]);
      const mounts = [...pod.initContainers, ...pod.containers].flatMap((c) => c.volumeMounts
        .filter((m: { name: string }) => m.name === 'repo-pvc')
        .map((m: { readOnly?: boolean }) => [c.name, m.readOnly]));
      assert.deepEqual(mounts, [['clone', true]]);
      assert.deepEqual(pod.initContainers.map((c: { name: string }) => c.name), ['clone', 'seal', 'run']);
      // The clone container's own argv, run here on a real repository with the pod's paths swapped for temp folders.
      const workspace = join(dir, `workspace-${id}`);
      const copy = spawnSync('sh', cloneArgv(pod, claim, workspace), { encoding: 'utf8', env: copyEnv });
      assert.equal(copy.status, 0, copy.stderr);
      assert.equal(git(workspace, 'rev-parse', 'HEAD'), git(claim, 'rev-parse', 'HEAD'));
      const origin = git(workspace, 'remote', 'get-url', 'origin');
      assert.equal(origin, 'https://github.com/acme/api.git', 'the seal pushes here');
      assert.equal(existsSync(join(workspace, '.svc', 'runs')), false, 'only committed files are copied');
      writeFileSync(join(workspace, 'src', 'app.js'), 'agent wrote this\n');
      assert.equal(git(claim, 'status', '--porcelain', 'src'), '', 'the claim is not the workspace');
    }
    spawnSync('git', ['remote', 'remove', 'origin'], { cwd: claim });
    const workspace = join(dir, 'workspace-j6c');
    assert.equal(spawnSync('sh', cloneArgv(podOf('j6c'), claim, workspace), { env: copyEnv }).status, 0);
    assert.equal(git(workspace, 'remote'), '', 'a claim with no origin gives a copy with none (a PR is then refused)');
    rmSync(claim, { recursive: true, force: true });
  });

  // The workspace's git config is the agent's to read: a token in the claim's origin must not reach it there. An ssh
  // user name is the login, not a secret.
  it('copies a claim\'s origin without an http(s) user info, any password, query or fragment', () => {
    const e = { ...env, SVC_K8S_REPO_PVC: 'repo-claim' };
    const pod = (buildKubeJob({ id: 'j6f', args: ['start', 'x'] }, kubernetesSettingsFromEnv(e), 'build', e) as any)
      .spec.template.spec;
    const claim = makeRepo();
    const git = (cwd: string, ...args: string[]) => spawnSync('git', args, { cwd, encoding: 'utf8' }).stdout.trim();
    const copyEnv = { PATH: process.env.PATH, HOME: dir };
    const api = 'github.com/acme/api.git';
    for (const [given, kept] of [
      [`https://x-access-token:ghp_claim@secret@${api}?private_token=q1#f`, `https://${api}`],
      [`HTTP://ghp_claim@${api}`, `HTTP://${api}`],
      ['https://example.test?private_token=q1', 'https://example.test'],
      ['https://ghp_claim@example.test#q1', 'https://example.test'],
      ['ssh://git:pw1@example.test:2222/acme/api.git', 'ssh://git@example.test:2222/acme/api.git'],
      ['ssh://git@example.test/acme/api.git?q1', 'ssh://git@example.test/acme/api.git'],
      ['git@github.com:acme/api.git', 'git@github.com:acme/api.git'],
    ] as const) {
      git(claim, 'remote', 'set-url', 'origin', given);
      const workspace = join(dir, `workspace-j6f-${encodeURIComponent(given)}`);
      const copy = spawnSync('sh', cloneArgv(pod, claim, workspace), { encoding: 'utf8', env: copyEnv });
      assert.equal(copy.status, 0, copy.stderr);
      assert.equal(git(workspace, 'remote', 'get-url', 'origin'), kept);
      const config = readFileSync(join(workspace, '.git', 'config'), 'utf8');
      for (const secret of ['ghp_claim', 'q1', 'pw1']) assert.equal(config.includes(secret), false, config);
    }
    rmSync(claim, { recursive: true, force: true });
  });

  it('refuses an SVC_K8S_REPO_URL holding a password or an http(s) user name, and keeps any other', () => {
    for (const url of ['https://x-access-token:ghp_url@github.com/acme/api.git', 'https://ghp_url@github.com/a/b.git',
      'ssh://git:pw@example.test/a/b.git', 'http://u:pw@example.test/a/b.git']) {
      assert.throws(() => kubernetesSettingsFromEnv({ ...env, SVC_K8S_REPO_URL: url }),
        (e: unknown) => e instanceof BadSettingError && e.message.includes('SVC_K8S_REPO_URL')
          && !e.message.includes('clone=') && !e.message.includes('ghp_url'), url);
    }
    for (const url of ['https://github.com/acme/api.git', 'http://git.example.test/a/b.git', 'git://example.test/a/b',
      'ssh://git@example.test:2222/a/b.git', 'git@github.com:acme/api.git', 'file:///srv/git/api.git']) {
      assert.equal(kubernetesSettingsFromEnv({ ...env, SVC_K8S_REPO_URL: url }).repoUrl, url);
    }
  });

  // A claim is the operator's volume, often written by a sync job running as another uid than the pod's.
  const asRoot = process.getuid?.() === 0;
  it('copies a claim owned by another uid, and an origin starting with "-", as they are', { skip: !asRoot }, () => {
    const e = { ...env, SVC_K8S_REPO_PVC: 'repo-claim' };
    const pod = (buildKubeJob({ id: 'j6d', args: ['start', 'x'] }, kubernetesSettingsFromEnv(e), 'build', e) as any)
      .spec.template.spec;
    const claim = makeRepo();
    const git = (cwd: string, ...args: string[]) => spawnSync('git', args, { cwd, encoding: 'utf8' });
    git(claim, 'remote', 'set-url', '--', 'origin', '--mirror=fetch');
    assert.equal(spawnSync('chown', ['-R', '54321:54321', claim]).status, 0);
    const workspace = join(dir, 'workspace-j6d');
    const copyEnv = { PATH: process.env.PATH, HOME: dir };
    const copy = spawnSync('sh', cloneArgv(pod, claim, workspace), { encoding: 'utf8', env: copyEnv });
    assert.equal(copy.status, 0, copy.stderr);
    assert.equal(git(workspace, 'remote', 'get-url', 'origin').stdout.trim(), '--mirror=fetch');
    rmSync(claim, { recursive: true, force: true });
  });

  it('leaves no trust file in the pod\'s /tmp when the claim\'s clone fails', () => {
    const e = { ...env, SVC_K8S_REPO_PVC: 'repo-claim' };
    const pod = (buildKubeJob({ id: 'j6e', args: ['start', 'x'] }, kubernetesSettingsFromEnv(e), 'build', e) as any)
      .spec.template.spec;
    const tmp = join(dir, 'tmp-j6e');
    mkdirSync(tmp);
    const copyEnv = { PATH: process.env.PATH, HOME: dir, TMPDIR: tmp };
    const copy = spawnSync('sh', cloneArgv(pod, join(dir, 'no-claim'), join(dir, 'workspace-j6e')), { env: copyEnv });
    assert.notEqual(copy.status, 0);
    assert.deepEqual(readdirSync(tmp), []);
  });

  it('makes DNS-1123 job names and refuses a missing image', () => {
    assert.match(kubeJobName('J_Weird.ID__with stuff'.repeat(5)), /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/);
    assert.throws(() => kubernetesSettingsFromEnv({}), /SVC_K8S_IMAGE/);
  });
});

describe('kubernetes executor', () => {
  it('creates a Job with the service-account token, learns the run from the pod log and follows it to the end', async () => {
    const ex = executor();
    const id = jobId();
    const launched = await ex.launch({
      run: newRunId(), workdir: '/', id, args: ['start', '--brief', 'announce fix it', '--pr', '--detach'],
    });
    assert.equal(launched.error, null);
    assert.equal(launched.run?.source, 'k8s');
    const create = kube.requests.find((r) => r.method === 'POST')!;
    assert.equal(create.url, '/apis/batch/v1/namespaces/build/jobs');
    assert.equal(create.authorization, 'Bearer sa-token-123');
    assert.equal(kube.jobs.get(kubeJobName(id))!.labels[LABEL_RUN], launched.run!.run);
    const outcome = await ex.follow(launched.run!, new AbortController().signal, { reattach: false, workdir: '/' });
    assert.deepEqual(outcome && outcome !== 'aborted' ? [outcome.status, outcome.verdict, outcome.pr_url] : outcome, ['succeeded', 'verified', 'https://git.example.test/acme/api/pull/9']);
  });

  it('reports a failed run with the error from its summary line', async () => {
    const ex = executor();
    const launched = await ex.launch({
      run: newRunId(), workdir: '/', id: jobId(), args: ['start', 'make-it-fail', '--detach'],
    });
    const outcome = await ex.follow(launched.run!, new AbortController().signal, { reattach: false, workdir: '/' });
    assert.ok(outcome && outcome !== 'aborted');
    assert.equal(outcome.status, 'failed');
    assert.equal(outcome.error, 'Required check "test" failed (exit 1)');
  });

  // The signer's log holds its stderr too, where an error's text may carry what the agent wrote into state.json.
  it('takes no outcome from a signer that did not exit 0, whatever its log says: the job fails with its error', async () => {
    const ex = executor();
    const launched = await ex.launch({
      run: newRunId(), workdir: '/', id: jobId(), args: ['start', 'announce signer-error', '--detach'],
    });
    const outcome = await ex.follow(launched.run!, new AbortController().signal, { reattach: false, workdir: '/' });
    assert.ok(outcome && outcome !== 'aborted');
    assert.deepEqual([outcome.status, outcome.verdict, outcome.pr_url, outcome.error],
      ['failed', null, null, 'Kubernetes Job failed: its signer exited with 1: Refused']);
  });

  // The outcome is the signer's termination message, not its log: a log of any length is for people.
  it('takes the outcome of a signer that logged 80 KiB before it', async () => {
    const ex = executor();
    const launched = await ex.launch({
      run: newRunId(), workdir: '/', id: jobId(), args: ['start', 'announce chatty', '--detach'],
    });
    const outcome = await ex.follow(launched.run!, new AbortController().signal, { reattach: false, workdir: '/' });
    assert.ok(outcome && outcome !== 'aborted');
    assert.deepEqual([outcome.status, outcome.verdict, outcome.error], ['succeeded', 'verified', null]);
    assert.ok(kube.requests.every((r) => !r.url.includes('container=signer')), 'the signer\'s log is never read');
  });

  // A Job made by the trigger before the termination message ran an older signer: its outcome is its log's marked line.
  it('takes the marked log line of a signer in a Job an older trigger made (no --outcome), across an upgrade', async () => {
    kube.runPods = false;
    try {
      const name = kubeJobName(jobId());
      const signer = { name: 'signer', args: ['pod', 'sign', '--run-id', 'rold', '--repo', '/workspace/repo', '--pr'] };
      const summary = { source: 'k8s', run: 'rold', status: 'succeeded', verdict: 'verified', error: null,
        pr_url: 'https://git.example.test/acme/api/pull/7', cost_usd: 0.5 };
      const line = `svc-signer-outcome ${JSON.stringify(summary)}`;
      kube.jobs.set(name, {
        manifest: { spec: { template: { spec: { containers: [signer] } } } }, labels: { [LABEL_RUN]: 'rold' },
        annotations: {}, status: {}, logs: { signer: `signing\n${line}\n` }, exitCodes: { signer: 0 }, stderr: '',
        pod: `${name}-x7k2q`,
      });
      kube.finish(name, true);
      const outcome = await executor().follow({ source: 'k8s', run: 'rold' }, new AbortController().signal, { reattach: true, workdir: '/' });
      assert.ok(outcome && outcome !== 'aborted');
      assert.deepEqual([outcome.status, outcome.verdict, outcome.pr_url, outcome.error],
        ['succeeded', 'verified', summary.pr_url, null]);
    } finally {
      kube.runPods = true;
    }
  });

  it('says a signer\'s outcome the kubelet cut (a pod with more containers) was cut, not that it left none', async () => {
    kube.runPods = false;
    try {
      const name = kubeJobName(jobId());
      const signer = { name: 'signer', args: ['pod', 'sign', '--run-id', 'rcut', '--outcome', '/dev/termination-log'] };
      kube.jobs.set(name, {
        manifest: { spec: { template: { spec: { containers: [signer] } } } }, labels: { [LABEL_RUN]: 'rcut' },
        annotations: {}, status: {}, logs: {}, exitCodes: { signer: 0 }, messages: { signer: '{"source":"k8s","run":"rc' },
        stderr: '', pod: `${name}-x7k2q`,
      });
      kube.finish(name, true);
      const outcome = await executor().follow({ source: 'k8s', run: 'rcut' }, new AbortController().signal, { reattach: true, workdir: '/' });
      assert.ok(outcome && outcome !== 'aborted');
      assert.deepEqual([outcome.status, outcome.error], ['failed', 'Kubernetes Job failed: its signer\'s outcome was cut or unreadable']);
    } finally {
      kube.runPods = true;
    }
  });

  it('writes the outcome to the signer\'s own termination file, on no volume any container mounts', () => {
    const e = { ...env, SVC_K8S_REPO_PVC: 'repo-claim', SVC_K8S_KEYS_SECRET: 'keys', SVC_K8S_CONTROL_TOKEN_SECRET: 'cp', SVC_K8S_RUN_CONTROL_TOKEN_SECRET: 'cp-run' };
    const pod = (buildKubeJob({ id: 'j5t', args: ['start', 'x'] }, kubernetesSettingsFromEnv(e), 'build', e) as any).spec.template.spec;
    const signer = pod.containers[0];
    assert.deepEqual([signer.terminationMessagePath, signer.terminationMessagePolicy], ['/dev/termination-log', 'File']);
    for (const c of [...pod.initContainers, ...pod.containers]) {
      for (const m of c.volumeMounts as Array<{ mountPath: string }>) {
        assert.ok(!`${signer.terminationMessagePath}/`.startsWith(`${m.mountPath}/`), `${c.name} mounts ${m.mountPath}`);
      }
    }
  });

  // The kubelet cuts each container's message to 12 KiB ÷ the pod's containers, sidecars included: a cut one would
  // not parse. 1536 bytes are eight containers' share (this pod's four, six with a mesh's istio-init and istio-proxy).
  it('fits the outcome in 1536 bytes, cutting a long error, and refuses one that cannot fit', () => {
    const base = { source: 'k8s', run: 'r1', status: 'failed', verdict: null, pr_url: null, cost_usd: 0.5 };
    const short = outcomeMessage({ ...base, error: 'Required check "test" failed (exit 1)' });
    assert.equal(JSON.parse(short).error, 'Required check "test" failed (exit 1)');
    const long = outcomeMessage({ ...base, error: `No receipt: ${'\u0001"é'.repeat(3000)}` });
    assert.ok(Buffer.byteLength(long) <= 1536, `${Buffer.byteLength(long)} bytes`);
    assert.ok(Buffer.byteLength(long) > 1400, 'cut no more than it must');
    assert.match(JSON.parse(long).error, /^No receipt: \u0001"é.*…$/s);
    assert.throws(() => outcomeMessage({ ...base, pr_url: `https://x.test/${'p'.repeat(4000)}`, error: 'x' }), /over the 1536/);
  });

  it('fails the launch when the pod ends without a run line', async () => {
    const id = jobId();
    const launched = await executor().launch({
      run: newRunId(), workdir: '/', id, args: ['start', 'no-run-line', '--detach'],
    });
    assert.equal(launched.run, null);
    assert.equal(launched.exitCode, 1);
    assert.match(launched.error!, new RegExp(`^Kubernetes Job ${kubeJobName(id)} ended without a \\{"source","run"\\} line`));
  });

  it('refuses to start with no API to reach: outside a cluster, SVC_K8S_API_URL is needed', () => {
    const { SVC_K8S_API_URL: _, ...outside } = env;
    assert.throws(() => executor({ env: outside }), { name: 'BadSettingError', message: /KUBERNETES_SERVICE_HOST/ });
  });

  it('fails the launch naming the API error when the API server cannot be reached', async () => {
    const launched = await executor({ env: { ...env, SVC_K8S_API_URL: 'http://127.0.0.1:9' } }).launch({
      run: newRunId(), workdir: '/', id: jobId(), args: ['start', 'x', '--detach'],
    });
    assert.equal(launched.run, null);
    assert.match(launched.error!, /^Kubernetes API: /);
  });

  it('fails the launch with the API status when Kubernetes refuses the Job', async () => {
    kube.refuseWith = 403;
    try {
      const launched = await executor().launch({
        run: newRunId(), workdir: '/', id: jobId(), args: ['start', 'x', '--detach'],
      });
      assert.equal(launched.run, null);
      assert.match(launched.error!, /^Kubernetes API refused Job svc-\S+ \(403: jobs\.batch is forbidden/);
    } finally {
      kube.refuseWith = null;
    }
  });

  // Whoever may read Jobs reads their manifests: there a credential the operator passes is a key of its Secret.
  it('writes no credential the operator passes into the Job: each is a key of SVC_K8S_ENV_SECRET, ' +
    'with or without a gate', async () => {
    const home = join(dir, 'operator-credentials-home');
    mkdirSync(join(home, '.svc'), { recursive: true });
    const cli = ['CLAUDE_CODE_OAUTH_TOKEN', 'OPENCODE_CONFIG_CONTENT', 'CLAUDE_CODE_CLIENT_KEY_PASSPHRASE'];
    const credentials = [...cli, 'NPM_TOKEN'];
    const passed = [...credentials, 'GITHUB_TOKEN', 'ANTHROPIC_MODEL'];
    writeFileSync(join(home, '.svc', 'operator.json'), JSON.stringify({ env: passed }));
    const held = { CLAUDE_CODE_OAUTH_TOKEN: 'sk-ant-oat01-trigger', OPENCODE_CONFIG_CONTENT: '{"apiKey":"oc-trigger"}',
      CLAUDE_CODE_CLIENT_KEY_PASSPHRASE: 'passphrase-trigger', NPM_TOKEN: 'npm-trigger', GITHUB_TOKEN: 'gh-trigger' };
    const gateSecret = join(dir, 'operator-credentials-gate-secret');
    writeFileSync(gateSecret, 'kube-credentials-gate-secret-0123456789abcdef');
    const base = { ...env, HOME: home, ANTHROPIC_MODEL: 'claude-test', SVC_K8S_ENV_SECRET: 'operator-env' };
    const gated = { ...base, ...held, SVC_K8S_GATE_URL: 'http://svc-gate:3128', SVC_GATE_SECRET_FILE: gateSecret };
    const manifestOf = async (e: NodeJS.ProcessEnv) => {
      const id = jobId();
      const ex = executor({ env: e });
      const launched = await ex.launch({ run: newRunId(), workdir: '/', id, args: ['start', 'x', '--detach'] });
      assert.equal(launched.error, null);
      // To its end: its pod's folders are gone after this file.
      await ex.follow(launched.run!, new AbortController().signal, { reattach: false, workdir: '/' });
      return kube.jobs.get(kubeJobName(id))!.manifest;
    };
    /** Each name's variables in the run container. */
    const runVars = (manifest: any, names: string[]) => names.map((name) =>
      runContainer(manifest.spec.template.spec).env.filter((v: { name: string }) => v.name === name));
    const ref = (key: string) =>
      [{ name: key, valueFrom: { secretKeyRef: { name: 'operator-env', key, optional: true } } }];
    // Without a gate, whether the trigger holds a value or not: the Secret's key by the same name, never the value.
    for (const e of [{ ...base, ...held }, base]) {
      const manifest = await manifestOf(e);
      const text = JSON.stringify(manifest);
      for (const value of Object.values(held)) assert.ok(!text.includes(value), `${value} reached the Job`);
      assert.deepEqual(runVars(manifest, credentials), credentials.map(ref));
      assert.deepEqual(runVars(manifest, ['GITHUB_TOKEN', 'ANTHROPIC_MODEL']),
        [[], [{ name: 'ANTHROPIC_MODEL', value: 'claude-test' }]]);
    }
    // Behind a gate the same: the operator named them, as a gated local run passes them; never the trigger's value.
    const behindGate = await manifestOf(gated);
    const text = JSON.stringify(behindGate);
    for (const value of Object.values(held)) assert.ok(!text.includes(value), `${value} reached the Job`);
    assert.deepEqual(runVars(behindGate, credentials), credentials.map(ref));
    // Without the Secret, none of them.
    const bare = JSON.stringify(await manifestOf({ ...base, ...held, SVC_K8S_ENV_SECRET: undefined }));
    for (const word of [...credentials, ...Object.values(held)]) {
      assert.ok(!bare.includes(word), `${word} reached the Job`);
    }
  });

  it('behind a gate, names the run\'s max_usd from the server\'s checkout in the credential; a broken policy launches nothing', async () => {
    const secret = join(dir, 'budget-gate-secret');
    writeFileSync(secret, 'kube-budget-gate-secret-0123456789abcdef');
    const checkout = join(dir, 'budget-checkout');
    mkdirSync(join(checkout, '.svc'), { recursive: true });
    writeFileSync(join(checkout, '.svc', 'policy.json'), JSON.stringify({ max_usd: 0.5 }));
    const gated = { ...env, SVC_K8S_GATE_URL: 'http://svc-gate:3128', SVC_GATE_SECRET_FILE: secret };
    const ex = createKubernetesExecutor({ env: gated, log: silentLogger, pollMs: 10, launchTimeoutMs: 10_000, shipGraceMs: 0 });
    const id = jobId();
    const launched = await ex.launch({ run: newRunId(), workdir: checkout, id, args: ['start', 'x', '--detach'] });
    assert.equal(launched.error, null);
    const pod = kube.jobs.get(kubeJobName(id))!.manifest.spec.template.spec;
    const base = runContainer(pod).env.find((v: { name: string }) => v.name === 'ANTHROPIC_BASE_URL').value as string;
    const credential = /^http:\/\/svc-gate:3128\/_job\/([^/]+)\/_model\/anthropic$/.exec(base)?.[1] ?? '';
    assert.equal(verifyJobCredential(Buffer.from('kube-budget-gate-secret-0123456789abcdef'), credential)?.maxUsd, 0.5);
    writeFileSync(join(checkout, '.svc', 'policy.json'), '{"max_usd": "lots"}');
    const broken = jobId();
    const refused = await ex.launch({
      run: newRunId(), workdir: checkout, id: broken, args: ['start', 'x', '--detach'],
    });
    assert.equal(refused.run, null);
    assert.match(refused.error ?? '', /policy\.json max_usd must be a positive number/);
    assert.equal(kube.jobs.has(kubeJobName(broken)), false);
    // The attack: the default branch points policy.json (or .svc) at /dev/zero or a host file the server can read.
    const hostFile = join(dir, 'host-secret.json');
    writeFileSync(hostFile, '{"host_secret_key": 1}');
    const outside = join(dir, 'outside-svc');
    mkdirSync(outside, { recursive: true });
    symlinkSync('/dev/zero', join(outside, 'policy.json'));
    for (const [at, target] of [['policy.json', '/dev/zero'], ['policy.json', hostFile], ['.svc', outside]] as const) {
      const path = at === '.svc' ? join(checkout, '.svc') : join(checkout, '.svc', 'policy.json');
      rmSync(path, { recursive: true, force: true });
      symlinkSync(target, path);
      const linked = jobId();
      const out = await ex.launch({ run: newRunId(), workdir: checkout, id: linked, args: ['start', 'x', '--detach'] });
      assert.equal(out.run, null);
      assert.match(out.error ?? '', /is a symbolic link \(never followed\)/);
      assert.doesNotMatch(out.error ?? '', /host_secret_key/);
      assert.equal(kube.jobs.has(kubeJobName(linked)), false);
      unlinkSync(path);
      mkdirSync(join(checkout, '.svc'), { recursive: true });
    }
    // The server lives on, and a plain policy launches again.
    writeFileSync(join(checkout, '.svc', 'policy.json'), JSON.stringify({ max_usd: 0.5 }));
    assert.equal((await ex.launch({ run: newRunId(), workdir: checkout, id: jobId(), args: ['start', 'x', '--detach'] })).error, null);
  });

  it('follows the existing Job\'s run when the Job already exists (a restart mid-launch)', async () => {
    const id = jobId();
    const first = await executor().launch({
      run: newRunId(), workdir: '/', id, args: ['start', 'announce', '--detach'],
    });
    const again = await executor().launch({
      run: newRunId(), workdir: '/', id, args: ['start', 'announce', '--detach'],
    });
    assert.equal(again.error, null);
    assert.deepEqual(again.run, first.run, 'the run id of the pod spec already in the cluster, not a new one');
    assert.equal(kube.requests.filter((r) => r.method === 'POST' && r.url.endsWith('/jobs')).length >= 2, true);
  });

  it('refuses to launch when a Job of that name exists whose pod spec fixes no run id', async () => {
    const id = jobId();
    const manifest = { spec: { template: { spec: { containers: [{ name: 'signer', args: ['pod', 'sign'] }] } } } };
    kube.jobs.set(kubeJobName(id), { manifest, labels: {}, annotations: {}, status: {}, logs: {}, stderr: '', pod: null });
    const launched = await executor().launch({ run: newRunId(), workdir: '/', id, args: ['start', 'x', '--detach'] });
    assert.equal(launched.run, null);
    assert.equal(launched.error, `Kubernetes Job ${kubeJobName(id)} already exists without a run id in its pod spec`);
  });

  it('fails the launch when the pod prints no run within the launch timeout', async () => {
    kube.runPods = false;
    try {
      const id = jobId();
      const launched = await executor({ launchTimeoutMs: 50 }).launch({
        run: newRunId(), workdir: '/', id, args: ['start', 'x', '--detach'],
      });
      assert.equal(launched.run, null);
      assert.equal(launched.error, `Kubernetes Job ${kubeJobName(id)} printed no run within 50 ms`);
    } finally {
      kube.runPods = true;
    }
  });

  it('follows after a restart the Job of a launch the server lost before the pod announced its run', async () => {
    const id = jobId();
    const run = newRunId();
    kube.runPods = false;
    try {
      // The server learned no run from this launch: it stands for one that died while the pod was still pending.
      const launched = await executor({ launchTimeoutMs: 50 }).launch({
        run, workdir: '/', id, args: ['start', 'announce', '--detach'],
      });
      assert.equal(launched.run, null);
    } finally {
      kube.runPods = true;
    }
    kube.finish(kubeJobName(id), false);
    const outcome = await executor().follow({ source: 'k8s', run }, new AbortController().signal, {
      reattach: true, launching: { launcher: null }, workdir: '/',
    });
    assert.ok(outcome !== null && outcome !== 'aborted', `followed to ${String(outcome)}`);
    assert.equal(outcome.status, 'failed');
  });

  it('re-attaches after a restart by finding the Job through its run label', async () => {
    const launched = await executor().launch({
      run: newRunId(), workdir: '/', id: jobId(), args: ['start', 'announce', '--detach'],
    });
    const fresh = executor();
    const outcome = await fresh.follow(launched.run!, new AbortController().signal, { reattach: true, workdir: '/' });
    assert.ok(outcome && outcome !== 'aborted');
    assert.equal(outcome.status, 'succeeded');
  });

  // The old flake: the pod printed its line and ended between the launch's log read and its Job read.
  it('finds the run line of a pod that ended between reading its log and reading its Job', async () => {
    kube.runPods = false;
    const id = jobId();
    const name = kubeJobName(id);
    kube.onRequest = (method, path) => {
      const job = kube.jobs.get(name);
      if (!job || method !== 'GET' || path !== `/apis/batch/v1/namespaces/build/jobs/${name}` || job.pod) return;
      const args = job.manifest.spec.template.spec.containers[0].args as string[];
      job.pod = `${name}-fast`;
      job.logs.run = `${JSON.stringify({ source: 'k8s', run: args[args.indexOf('--run-id') + 1] })}\n`;
      kube.finish(name, true);
    };
    try {
      const launched = await executor().launch({
        run: newRunId(), workdir: '/', id, args: ['start', 'announce', '--detach'],
      });
      assert.equal(launched.error, null);
      assert.equal(launched.run?.source, 'k8s');
    } finally {
      kube.onRequest = null;
      kube.runPods = true;
    }
  });

  it('falls back to the Job status when the pod printed no summary; a complete Job without one fails', async () => {
    kube.runPods = false;
    try {
      const name = kubeJobName(jobId());
      kube.jobs.set(name, { manifest: {}, labels: { [LABEL_RUN]: 'rquiet' }, annotations: {}, status: {}, logs: {}, stderr: '', pod: null });
      kube.finish(name, false);
      const outcome = await executor().follow({ source: 'k8s', run: 'rquiet' }, new AbortController().signal, { reattach: false, workdir: '/' });
      assert.ok(outcome && outcome !== 'aborted');
      assert.equal(outcome.status, 'failed');
      assert.equal(outcome.error, 'Kubernetes Job failed: Job has reached the specified backoff limit');
      // The signer exits 0 for a failed run too: a complete Job says nothing of the run without its signer's line.
      const done = kubeJobName(jobId());
      kube.jobs.set(done, { manifest: {}, labels: { [LABEL_RUN]: 'rdone' }, annotations: {}, status: {}, logs: {}, stderr: '', pod: null });
      kube.finish(done, true);
      const gone = await executor().follow({ source: 'k8s', run: 'rdone' }, new AbortController().signal, { reattach: false, workdir: '/' });
      assert.ok(gone && gone !== 'aborted');
      assert.deepEqual([gone.status, gone.error], ['failed', 'Kubernetes Job failed: its signer\'s outcome is gone']);
    } finally {
      kube.runPods = true;
    }
  });

  it('answers null for a run with no Job and no Control Plane, and aborted when the server shuts down', async () => {
    assert.equal(await executor().follow({ source: 'k8s', run: 'rnowhere' }, new AbortController().signal, { reattach: true, workdir: '/' }), null);
    const name = kubeJobName(jobId());
    kube.jobs.set(name, { manifest: {}, labels: { [LABEL_RUN]: 'rlong' }, annotations: {}, status: {}, logs: {}, stderr: '', pod: null });
    const ac = new AbortController();
    const pending = executor().follow({ source: 'k8s', run: 'rlong' }, ac.signal, { reattach: false, workdir: '/' });
    await waitFor(() => kube.requests.some((r) => r.url.endsWith(`/jobs/${name}`)), 'a poll of the running Job');
    ac.abort();
    assert.equal(await pending, 'aborted');
  });

  // The run container's agent reads the key handed to it, which the Control Plane takes for the run until the signer's
  // first batch moves the run onto the sealed key: with the Job gone, only a copy the signer wrote is the outcome.
  it('with the Job gone, takes the Control Plane\'s copy of the run only from its signer', async () => {
    const token = 'cp-token-gone';
    const cp = await startTestControl({ token });
    try {
      const key = newRunKey();
      const at = (ago: number) => new Date(Date.now() - ago).toISOString();
      const ship = async (fields: Record<string, unknown>, runKey: string) => {
        const runs = [{ run: 'rgone', started_at: at(60_000), run_key: runKey, ...fields }];
        const res = await cp.request('POST', '/v1/ingest', { token, body: { source: 'k8s', runs } });
        assert.equal(res.status, 200, res.text);
      };
      // Re-attached after a restart: the Job its label finds, gone (past its TTL) by the time it is read; or none.
      const follow = (found: boolean) => {
        const name = kubeJobName(jobId());
        if (found) {
          const labels = { [LABEL_RUN]: 'rgone' };
          kube.jobs.set(name, { manifest: {}, labels, annotations: {}, status: {}, logs: {}, stderr: '', pod: null });
          kube.onRequest = (method, path) => {
            if (method === 'GET' && path.endsWith(`/jobs/${name}`)) kube.jobs.delete(name);
          };
        }
        return executor({ controlUrl: cp.url, controlToken: token }).follow(
          { source: 'k8s', run: 'rgone' }, new AbortController().signal, { reattach: true, workdir: '/' });
      };
      const failed = (why: string) => ({
        status: 'failed', verdict: null, pr_url: null, cost_usd: null, started_at: null, ended_at: null,
        error: `Kubernetes Job failed: ${why}`,
      });
      const lost = failed('gone before its signer shipped the run (the Control Plane holds only what the run ' +
        'container shipped)');
      // The seal step's store, then the run container's claim, with the handed key.
      await ship({ status: 'queued', updated_at: at(60_000) }, handedRunKey(key));
      const forged = { status: 'succeeded', pr_url: 'https://github.com/acme/api/pull/666', cost_usd: 0.01 };
      await ship({ ...forged, updated_at: at(30_000), ended_at: at(30_000) }, handedRunKey(key));
      assert.deepEqual(await follow(true), lost);
      // No Job found at all (an unlabelled one may still run): interrupted, not a failure nobody saw.
      assert.equal(await follow(false), null);
      // The signer's first batch (queued, at the seal's time) moves the run; the signer dies before its last.
      await ship({ status: 'queued', updated_at: at(60_000) }, key);
      assert.deepEqual(await follow(true),
        failed('gone before its signer ended the run (the signer moved the run onto its key and shipped no end)'));
      assert.equal(await follow(false), null);
      await ship({ status: 'failed', error: 'check "test" failed', updated_at: at(1_000), ended_at: at(1_000) }, key);
      for (const found of [true, false]) {
        const signed = await follow(found);
        assert.ok(signed && signed !== 'aborted');
        assert.deepEqual([signed.status, signed.error, signed.pr_url], ['failed', 'check "test" failed', null]);
      }
    } finally {
      kube.onRequest = null;
      await cp.close();
    }
  });

  // A pod's run ships its state to the Control Plane: a question it asks there reaches the job's origin (job-loop.ts).
  // The trigger's token is the documented one (docs/trigger.md): a runner token of its own source with read=k8s.
  it('tells the question a running pod\'s run asks, read from the Control Plane with the trigger\'s runner token', async () => {
    const TRIGGER = 'trigger-runner-token-0123456789abcdef';
    const runnerTokens = [{ source: 'trigger', token: TRIGGER, reads: ['k8s'] }];
    const cp = await startTestControl({ token: 'cp-token-q', settings: { runnerTokens } });
    try {
      cp.deps.stores.runs.upsert('k8s', { run: 'rasks', status: 'blocked', started_at: Date.now(), question: 'Which DB?' });
      const name = kubeJobName(jobId());
      kube.jobs.set(name, { manifest: {}, labels: { [LABEL_RUN]: 'rasks' }, annotations: {}, status: {}, logs: {}, stderr: '', pod: null });
      const asked: Array<string | null> = [];
      const ac = new AbortController();
      const pending = executor({ controlUrl: cp.url, controlToken: TRIGGER }).follow(
        { source: 'k8s', run: 'rasks' }, ac.signal, { reattach: false, workdir: '/', onQuestion: (q) => asked.push(q) },
      );
      await waitFor(() => asked.length === 1, 'the question');
      assert.deepEqual(asked, ['Which DB?']);
      ac.abort();
      assert.equal(await pending, 'aborted');
    } finally {
      await cp.close();
    }
  });

  it('says, once, that the Control Plane refuses its token the pod runs, rather than taking that for no copy yet', async () => {
    const TRIGGER = 'trigger-runner-token-0123456789abcdef';
    const cp = await startTestControl({ token: 'cp-token-q', settings: { runnerTokens: [{ source: 'trigger', token: TRIGGER }] } });
    const lines: string[] = [];
    try {
      cp.deps.stores.runs.upsert('k8s', { run: 'rdenied', status: 'blocked', started_at: Date.now(), question: 'Which DB?' });
      const name = kubeJobName(jobId());
      kube.jobs.set(name, { manifest: {}, labels: { [LABEL_RUN]: 'rdenied' }, annotations: {}, status: {}, logs: {}, stderr: '', pod: null });
      const ac = new AbortController();
      const log = createLogger('trigger', (line) => lines.push(line));
      const pending = executor({ controlUrl: cp.url, controlToken: TRIGGER, log }).follow(
        { source: 'k8s', run: 'rdenied' }, ac.signal, { reattach: false, workdir: '/', onQuestion: () => {} },
      );
      await waitFor(() => lines.some((l) => l.includes('refuses this trigger')), 'the refusal logged');
      // Two more polls of the Job: the first of them asked the Control Plane again and was refused again (not a
      // fixed wait, which a loaded machine could spend without a single poll).
      const polls = () => kube.requests.filter((r) => r.url.endsWith(`/jobs/${name}`)).length;
      const seen = polls();
      await waitFor(() => polls() >= seen + 2, 'two more polls of the Job');
      ac.abort();
      assert.equal(await pending, 'aborted');
      const said = lines.filter((l) => l.includes('refuses this trigger'));
      assert.equal(said.length, 1, said.join(''));
      assert.match(said[0]!, /"level":"error".*Missing or wrong bearer token/);
    } finally {
      await cp.close();
    }
  });
});

describe('svc trigger serve with SVC_TRIGGER_EXECUTOR=kubernetes', () => {
  it('exits 2 naming SVC_K8S_IMAGE when the image is not configured', () => {
    const cli = join(import.meta.dirname, '../../dist/cli.js');
    const r = spawnSync(process.execPath, [cli, 'trigger', 'serve', '--port', '0', '--db', join(dir, 'cli-trigger.db')], {
      env: { PATH: process.env.PATH, HOME: dir, SVC_TRIGGER_EXECUTOR: 'kubernetes', SVC_K8S_API_URL: kube.url }, encoding: 'utf8', timeout: 20_000,
    });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /SVC_K8S_IMAGE/);
  });

  it('serves from a working folder outside git, as the shipped deployment does (pods never use it)', async () => {
    const cli = join(import.meta.dirname, '../../dist/cli.js');
    const workdir = tempDir('svc-k8s-workdir-');
    const child = spawn(process.execPath, [cli, 'trigger', 'serve', '--port', '0'], {
      cwd: workdir, stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...env, HOME: workdir, SVC_TRIGGER_EXECUTOR: 'kubernetes', SVC_K8S_REPO_URL: 'https://git.test/acme/api.git',
      },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      await Promise.race([
        waitFor(() => /^http:\/\/127\.0\.0\.1:\d+\n/.test(out), 'the server to listen'),
        exited.then((code) => assert.fail(`exited ${code}: ${err}`)),
      ]);
      child.kill('SIGTERM');
      assert.equal(await exited, 0, err);
    } finally {
      child.kill('SIGKILL');
      rmSync(workdir, { recursive: true, force: true });
    }
  });
});

describe('kubernetes executor end to end through the trigger server', () => {
  let cp: TestControl;
  let trigger: TestTrigger;
  const CP_TOKEN = 'cp-token-e2e';

  before(async () => {
    cp = await startTestControl({ token: CP_TOKEN });
    podSecrets.set('svc-control', CP_TOKEN);
    const triggerEnv = { SVC_SOURCE: 'k8s', SVC_CONTROL_URL: cp.url, SVC_CONTROL_TOKEN: CP_TOKEN };
    const ex = executor({ env: { ...env, ...triggerEnv, SVC_K8S_CONTROL_TOKEN_SECRET: 'svc-control', SVC_K8S_RUN_CONTROL_TOKEN_SECRET: 'svc-control-run' }, controlUrl: cp.url, controlToken: CP_TOKEN, shipGraceMs: 5_000 });
    trigger = await startTestTrigger(triggerEnv, { executor: ex });
  });
  after(async () => {
    await trigger.cleanup();
    await cp.close();
  });

  it('runs a POST /jobs job as a Kubernetes Job whose run ships to the Control Plane', async () => {
    const auth = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
    const queued = await post(`${trigger.url}/jobs`, JSON.stringify({ brief: 'announce fix the crash', pr: true }), auth);
    assert.equal(queued.status, 202);
    const id = queued.body.job_id as string;
    const job = await waitFor(async () => {
      const res = await get(`${trigger.url}/jobs/${id}`, auth);
      return res.body.status === 'succeeded' || res.body.status === 'failed' ? res.body : null;
    }, 'the job to finish');
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    const run = job.run as { source: string; run: string };
    assert.equal(run.source, 'k8s');
    const kubeJob = kube.jobs.get(kubeJobName(id))!;
    assert.deepEqual(runContainer(kubeJob.manifest.spec.template.spec).args, ['start', '--brief', 'announce fix the crash', '--pr', '--run-id', run.run]);
    const shipped = await cp.request('GET', `/v1/runs/k8s/${run.run}`);
    assert.equal(shipped.status, 200);
    assert.equal(shipped.json.status, 'succeeded');
    assert.equal(shipped.json.verdict, 'verified');
  });
});
