// The Kubernetes objects svc builds or ships, validated against Kubernetes' own OpenAPI schemas:
// every Job the executor builds, for each combination of its SVC_K8S_* settings, and every manifest in scripts/k8s.
// The schemas come from the `kubernetes-models` devDependency (generated from the official OpenAPI spec); nothing
// at run time depends on it.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { buildKubeJob } from '../../src/trigger/kubernetes-executor.ts';
import { kubernetesSettingsFromEnv } from '../../src/trigger/kubernetes-pod.ts';
import { BadSettingError } from '../../src/errors.ts';
import { unknownFieldErrors, type K8sObject } from '../helpers/k8s-strict.ts';
import { verifyJobCredential } from '../../src/gate/job-credential.ts';

const K8S_DIR = join(import.meta.dirname, '../../scripts/k8s');
// The secret the trigger mints pods' gate credentials with (shared with `svc gate serve`).
const GATE_SECRET = 'k8s-schemas-test-gate-secret-0123456789abcdef';
const GATE_SECRET_DIR = mkdtempSync(join(tmpdir(), 'svc-k8s-gate-'));
const GATE_SECRET_FILE = join(GATE_SECRET_DIR, 'gate-secret');
writeFileSync(GATE_SECRET_FILE, `${GATE_SECRET}\n`, { mode: 0o600 });
after(() => rmSync(GATE_SECRET_DIR, { recursive: true, force: true }));

/** Each optional setting with a realistic value; the test builds a Job for every subset of them. */
const OPTIONAL: Record<string, string> = {
  SVC_K8S_NAMESPACE: 'build',
  SVC_K8S_SERVICE_ACCOUNT: 'svc-runner',
  SVC_K8S_CPU: '500m',
  SVC_K8S_MEMORY: '1Gi',
  SVC_K8S_REPO_URL: 'https://git.example.test/acme/api.git',
  SVC_K8S_REPO_REF: 'main',
  SVC_K8S_REPO_PVC: 'acme-api',
  SVC_K8S_ENV_SECRET: 'svc-provider-keys',
  SVC_K8S_CONTROL_TOKEN_SECRET: 'svc-control',
  SVC_K8S_RUN_CONTROL_TOKEN_SECRET: 'svc-control-run',
  SVC_K8S_KEYS_SECRET: 'svc-keys',
  SVC_K8S_SIGNER_ENV_SECRET: 'svc-github',
  SVC_K8S_TTL_SECONDS: '600',
  SVC_K8S_ACTIVE_DEADLINE_SECONDS: '7200',
  SVC_K8S_SOURCE: 'k8s-build',
};

function schemaErrors(validate: () => void): string | null {
  try {
    validate();
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** The model class for an object's apiVersion and kind, e.g. apps/v1 Deployment → kubernetes-models/apps/v1/Deployment. */
async function modelFor(apiVersion: string, kind: string): Promise<new (data: unknown) => { validate(): void }> {
  const module = (await import(`kubernetes-models/${apiVersion}/${kind}`)) as Record<string, new (data: unknown) => { validate(): void }>;
  const model = module[kind];
  assert.ok(model, `kubernetes-models has no ${apiVersion} ${kind}`);
  return model;
}

describe('Kubernetes objects against the official schemas', () => {
  it('every Job the executor builds validates, for each combination of its settings', () => {
    // The run container's token goes with the shippers' one (kubernetes-pod.ts runTokenSecretOf), never alone.
    const names = Object.keys(OPTIONAL).filter((name) => name !== 'SVC_K8S_RUN_CONTROL_TOKEN_SECRET');
    const base = { SVC_K8S_IMAGE: 'registry.example.test/svc:1.0', PATH: '/usr/bin', LANG: 'C.UTF-8', SVC_CONTROL_URL: 'http://control:47821' };
    let checked = 0;
    for (let mask = 0; mask < 1 << names.length; mask++) {
      const env: NodeJS.ProcessEnv = { ...base };
      names.forEach((name, i) => {
        if (mask & (1 << i)) env[name] = OPTIONAL[name];
      });
      if (env.SVC_K8S_CONTROL_TOKEN_SECRET) env.SVC_K8S_RUN_CONTROL_TOKEN_SECRET = OPTIONAL.SVC_K8S_RUN_CONTROL_TOKEN_SECRET;
      const settings = kubernetesSettingsFromEnv(env);
      const routed = { name: 'acme/web', clone: 'https://github.com/acme/web.git' };
      for (const job of [{ id: 'j01jd0000000000000000000000', args: ['start', 'trackera:LIN-34', '--detach'], origin: 'trackera' }, { id: 'J2', args: ['start', '--brief', 'fix it', '--pr'] }, { id: 'J3', args: ['start', '--brief', 'fix it', '--pr'], origin: 'github', repo: routed }]) {
        const object = buildKubeJob(job, settings, settings.namespace ?? 'default', env);
        const problem = schemaErrors(() => new Job(object as ConstructorParameters<typeof Job>[0]).validate());
        assert.equal(problem, null, `settings ${JSON.stringify(Object.keys(env).filter((k) => k in OPTIONAL))}: ${problem}`);
        checked++;
      }
    }
    assert.equal(checked, 3 << names.length);
  });

  it('a Job whose pod reaches out through svc gate serve validates, and points every container at the gate', () => {
    const { SVC_K8S_REPO_PVC: _pvc, ...clone } = OPTIONAL;
    const env = { SVC_K8S_IMAGE: 'svc:1', SVC_CONTROL_URL: 'http://svc-control:47821', ...clone,
      SVC_K8S_GATE_URL: 'http://svc-gate:3128', SVC_GATE_SECRET_FILE: GATE_SECRET_FILE,
      ANTHROPIC_API_KEY: 'real-key-never-in-a-pod' };
    const job = { id: 'j1', args: ['start', 'x'], repo: { name: 'acme/web', clone: 'https://git.example.test/w.git' } };
    const object = buildKubeJob(job, kubernetesSettingsFromEnv(env), 'default', env);
    assert.equal(schemaErrors(() => new Job(object as ConstructorParameters<typeof Job>[0]).validate()), null);
    const text = JSON.stringify(object);
    assert.equal(text.includes('real-key-never-in-a-pod'), false);
    assert.equal(text.includes(GATE_SECRET), false, 'the gate secret stays with the trigger');
    const spec = (object as any).spec.template.spec;
    for (const c of [...spec.initContainers.filter((i: any) => i.name !== 'seal'), ...spec.containers]) {
      const env = new Map((c.env as Array<{ name: string; value: string }>).map((e) => [e.name, e.value]));
      const proxy = /^http:\/\/svc:(g1\.[\w-]+\.[\w-]+)@svc-gate:3128$/.exec(env.get('HTTPS_PROXY') ?? '');
      assert.ok(proxy, `${c.name}: ${env.get('HTTPS_PROXY')}`);
      const who = verifyJobCredential(Buffer.from(GATE_SECRET), proxy[1] ?? '');
      assert.equal(who?.job, 'j1');
      assert.equal(who?.repo, 'acme/web');
      assert.equal(env.get('ANTHROPIC_BASE_URL'), `http://svc-gate:3128/_job/${proxy[1]}/_model/anthropic`, c.name);
      assert.match(env.get('NO_PROXY') ?? '', /svc-control/);
      assert.match(env.get('NO_PROXY') ?? '', /(^|,)svc-gate(,|$)/, 'model CLIs talk to the gate directly');
    }
    assert.throws(() => kubernetesSettingsFromEnv({ SVC_K8S_IMAGE: 'svc:1', SVC_K8S_GATE_URL: 'https://x/y' }), BadSettingError);
    // A gate URL without the secret would give pods no credential: every one of their connections refused.
    assert.throws(() => kubernetesSettingsFromEnv({ SVC_K8S_IMAGE: 'svc:1', SVC_K8S_GATE_URL: 'http://svc-gate:3128' }),
      /SVC_GATE_SECRET_FILE/);
  });

  it('clones the routed repository: its clone URL over SVC_K8S_REPO_URL, REF and PVC, and names the run after it', () => {
    const env = { SVC_K8S_IMAGE: 'svc:1', ...OPTIONAL, SVC_REPO_NAME: 'evil/from-the-server-env' };
    const settings = kubernetesSettingsFromEnv(env);
    type Container = { name: string; command?: string[]; env?: Array<{ name: string; value: string }> };
    type Pod = { initContainers: Container[]; containers: Container[]; volumes: Array<Record<string, unknown>> };
    const podOf = (job: Parameters<typeof buildKubeJob>[0]): Pod =>
      (buildKubeJob(job, settings, 'default', env) as { spec: { template: { spec: Pod } } }).spec.template.spec;
    const repo = { name: 'acme/web', clone: 'https://github.com/acme/web.git' };
    const pod = podOf({ id: 'j1', args: ['start', 'x'], origin: 'github', repo });
    const clone = pod.initContainers.find((c) => c.name === 'clone');
    assert.deepEqual(clone?.command, ['git', 'clone', '--depth', '50', '--', repo.clone, '/workspace/repo']);
    assert.deepEqual(pod.volumes.find((v) => v.name === 'workspace'), { name: 'workspace', emptyDir: {} });
    for (const c of [...pod.initContainers.filter((i) => i.name === 'run'), ...pod.containers]) {
      assert.deepEqual(c.env?.filter((e) => e.name === 'SVC_REPO_NAME'), [{ name: 'SVC_REPO_NAME', value: 'acme/web' }]);
    }
    // An entry with no clone URL (the one repository served, a checkout= line) copies the configured claim.
    const local = podOf({ id: 'j2', args: ['start', 'x'], origin: 'github', repo: { name: 'acme/api', clone: null } });
    assert.deepEqual(local.initContainers.find((c) => c.name === 'clone')?.command?.slice(0, 2), ['sh', '-c']);
    assert.deepEqual(local.volumes.find((v) => v.name === 'workspace'), { name: 'workspace', emptyDir: {} });
    assert.deepEqual(local.volumes.find((v) => v.name === 'repo-pvc')?.persistentVolumeClaim,
      { claimName: 'acme-api', readOnly: true });
    assert.equal(JSON.stringify(local).includes('evil/from-the-server-env'), false);
  });

  it('refuses a Job with a wrong type, so the check can fail', () => {
    const env = { SVC_K8S_IMAGE: 'svc:1' };
    const object = buildKubeJob({ id: 'j1', args: ['start', 'x'] }, kubernetesSettingsFromEnv(env), 'default', env) as { spec: Record<string, unknown> };
    object.spec.backoffLimit = 'never';
    assert.match(schemaErrors(() => new Job(object as unknown as ConstructorParameters<typeof Job>[0]).validate()) ?? '', /backoffLimit/);
  });

  it('has no field the schemas do not know (kubectl apply --validate=strict), in Jobs and manifests', () => {
    const objects: K8sObject[] = [];
    const base = { SVC_K8S_IMAGE: 'svc:1', SVC_CONTROL_URL: 'http://control:47821' };
    const variants: Array<[string, NodeJS.ProcessEnv]> = [['no options', base], ['every option', { ...base, ...OPTIONAL }]];
    const { SVC_K8S_REPO_PVC: _pvc, ...clone } = OPTIONAL;
    variants.push(['clone instead of PVC', { ...base, ...clone }]);
    variants.push(['clone through the gate',
      { ...base, ...clone, SVC_K8S_GATE_URL: 'http://svc-gate:3128', SVC_GATE_SECRET_FILE: GATE_SECRET_FILE }]);
    const { SVC_K8S_CONTROL_TOKEN_SECRET: shippers, SVC_K8S_RUN_CONTROL_TOKEN_SECRET: run, ...alone } = OPTIONAL;
    for (const [name, value] of Object.entries(alone)) variants.push([name, { ...base, [name]: value }]);
    variants.push(['control tokens', { ...base, SVC_K8S_CONTROL_TOKEN_SECRET: shippers, SVC_K8S_RUN_CONTROL_TOKEN_SECRET: run }]);
    for (const [label, env] of variants) {
      const object = buildKubeJob({ id: 'j1', args: ['start', 'x', '--detach'], origin: 'jobs' }, kubernetesSettingsFromEnv(env), 'default', env);
      objects.push({ label: `Job (${label})`, object: object as K8sObject['object'] });
    }
    for (const file of readdirSync(K8S_DIR).filter((f) => /\.ya?ml$/.test(f))) {
      for (const doc of parseAllDocuments(readFileSync(join(K8S_DIR, file), 'utf8'))) {
        const object = doc.toJS() as K8sObject['object'] & { metadata?: { name?: string } } | null;
        if (object) objects.push({ label: `${file} ${object.kind} ${object.metadata?.name}`, object });
      }
    }
    // One deliberate misspelling rides along (one compile for all), so the check is seen to fail where it should.
    const typo = { ...(objects[0]!.object as Record<string, unknown>), spek: {} } as unknown as K8sObject['object'];
    const errors = unknownFieldErrors([...objects, { label: 'typo', object: typo }]);
    assert.equal(errors.length, 1, errors.join('\n'));
    assert.match(errors[0]!, /^typo: .*spek/);
  });

  const files = readdirSync(K8S_DIR).filter((f) => /\.ya?ml$/.test(f)).sort();
  it('ships manifests to check', () => assert.ok(files.length >= 2, files.join(', ')));
  for (const file of files) {
    it(`every object in scripts/k8s/${file} validates`, async () => {
      const docs = parseAllDocuments(readFileSync(join(K8S_DIR, file), 'utf8'));
      assert.ok(docs.length > 0);
      for (const doc of docs) {
        assert.deepEqual(doc.errors, [], `${file}: YAML errors`);
        const object = doc.toJS() as { apiVersion?: unknown; kind?: unknown; metadata?: { name?: unknown } } | null;
        if (object === null) continue;
        assert.equal(typeof object.apiVersion, 'string', `${file}: an object without apiVersion`);
        assert.equal(typeof object.kind, 'string', `${file}: an object without kind`);
        const Model = await modelFor(object.apiVersion as string, object.kind as string);
        const problem = schemaErrors(() => new Model(object).validate());
        assert.equal(problem, null, `${file} ${object.kind} ${String(object.metadata?.name)}: ${problem}`);
      }
    });
  }
});
