// The Kubernetes manifests as an operator applies them: each Deployment's container started as the image starts it
// (`svc` + its args, the Containerfile's ENV under the manifest's env, its WORKDIR), with the Secrets docs/deploy.md
// makes, each mounted Secret or ConfigMap written as files, every mount moved under a temp root and each Service
// name onto the loopback server that plays it. Shows that they start as written and take each other's tokens.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { serve, stop, type Served } from '../helpers/serve-cli.ts';
import { closedPort } from '../helpers/closed-port.ts';
import { waitFor } from '../helpers/wait-for.ts';

const SCRIPTS = join(import.meta.dirname, '../../scripts');
const root = mkdtempSync(join(tmpdir(), 'svc-k8s-boot-'));
const token = (c: string) => c.repeat(64);
const CONTROL_TOKEN = token('c');
const TRIGGER_TOKEN = token('t');

/** The Secrets of docs/deploy.md's "Kubernetes" commands, by name and key. */
const SECRETS: Record<string, Record<string, string>> = {
  'svc-control': {
    token: CONTROL_TOKEN,
    'runner-tokens': `trigger ${TRIGGER_TOKEN} read=k8s\nk8s ${token('p')}\nk8s ${token('r')} bound-runs\n`,
  },
  'svc-trigger': { SVC_API_TOKEN: token('a'), SVC_CONTROL_TOKEN: TRIGGER_TOKEN },
  'svc-gate': { ANTHROPIC_API_KEY: 'sk-ant-k8s-manifests-test' },
  'svc-gate-secret': { 'gate-secret': token('g') },
};

interface Container {
  args: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: Record<string, { name?: string; key?: string }> }>;
  envFrom?: Array<{ secretRef: { name: string } }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}
interface Volume {
  name: string;
  secret?: { secretName: string; items?: Array<{ key: string; path: string }> };
  configMap?: { name: string };
}
type K8sObject = { kind: string; metadata: { name: string }; data?: Record<string, string>;
  spec: { template: { spec: { containers: Container[]; volumes?: Volume[] } } } };

const objects = ['control-plane.yaml', 'gate.yaml', 'trigger.yaml']
  .flatMap((f) => parseAllDocuments(readFileSync(join(SCRIPTS, 'k8s', f), 'utf8')).map((d) => d.toJS() as K8sObject));
const deployment = (name: string) => objects.find((o) => o.kind === 'Deployment' && o.metadata.name === name)!;

/** The Containerfile's `ENV` pairs (but PATH) and its WORKDIR: what every container starts with. */
function image(): { env: Record<string, string>; workdir: string } {
  const text = readFileSync(join(SCRIPTS, 'container', 'Containerfile'), 'utf8').replace(/\\\n\s*/g, ' ');
  const pairs = /^ENV (.*)$/m.exec(text)![1]!.trim().split(/\s+/).map((p) => p.split('=') as [string, string]);
  return { env: Object.fromEntries(pairs.filter(([k]) => k !== 'PATH')), workdir: /^WORKDIR (\S+)$/m.exec(text)![1]! };
}

/** A Deployment's first container as the kubelet would start it, moved under `root` and onto `services`. */
function container(name: string, services: Record<string, string>): { args: string[]; env: NodeJS.ProcessEnv;
  cwd: string } {
  const pod = deployment(name).spec.template.spec;
  const c = pod.containers[0]!;
  const { env: imageEnv, workdir } = image();
  const mounts = [...(c.volumeMounts ?? []).map((m) => m.mountPath), workdir];
  const moved = (v: string) => (mounts.some((m) => v === m || v.startsWith(`${m}/`)) ? join(root, name, v) : v);
  for (const m of c.volumeMounts ?? []) {
    const volume = pod.volumes!.find((v) => v.name === m.name)!;
    const dir = join(root, name, m.mountPath);
    mkdirSync(dir, { recursive: true });
    const files = volume.secret
      ? (volume.secret.items ?? Object.keys(SECRETS[volume.secret.secretName]!).map((key) => ({ key, path: key })))
        .map(({ key, path }) => [path, SECRETS[volume.secret!.secretName]![key]!] as const)
      : Object.entries(volume.configMap
        ? objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === volume.configMap!.name)!.data!
        : {});
    for (const [file, text] of files) writeFileSync(join(dir, file), text, { mode: 0o600 });
  }
  const env: Record<string, string> = { ...imageEnv };
  for (const from of c.envFrom ?? []) Object.assign(env, SECRETS[from.secretRef.name]);
  for (const e of c.env ?? []) {
    const ref = e.valueFrom?.secretKeyRef;
    env[e.name] = e.value ?? (ref ? SECRETS[ref.name!]![ref.key!]! : 'default');
  }
  for (const [k, v] of Object.entries(env)) {
    let value = moved(v);
    for (const [service, url] of Object.entries(services)) value = value.replace(`http://${service}`, url);
    // Bound to loopback on a free port: the test reaches nothing beyond this machine, and nothing reaches it.
    env[k] = /^SVC_\w+_HOST$/.test(k) ? '127.0.0.1' : /^SVC_\w+_PORT$/.test(k) ? '0' : value;
  }
  const bound: Record<string, string> = { '--host': '127.0.0.1', '--port': '0' };
  const args = c.args.map(moved).map((a, i, all) => bound[all[i - 1] ?? ''] ?? a);
  const cwd = moved(workdir);
  mkdirSync(cwd, { recursive: true });
  return { args, env: { ...env, PATH: process.env.PATH }, cwd };
}

describe('scripts/k8s manifests, started as Kubernetes would start them', () => {
  const served: Served[] = [];
  let control: Served;

  before(async () => {
    const c = container('svc-control', {});
    control = await serve(c.args, c.env, undefined, c.cwd);
    served.push(control);
  });

  after(async () => {
    for (const s of served) await stop(s);
    rmSync(root, { recursive: true, force: true });
  });

  it('the Control Plane is ready and holds the token of its Secret', async () => {
    assert.equal((await fetch(`${control.url}/ready`)).status, 200);
    assert.equal((await fetch(`${control.url}/v1/runs`)).status, 401);
    const ok = await fetch(`${control.url}/v1/runs`, { headers: { authorization: `Bearer ${CONTROL_TOKEN}` } });
    assert.equal(ok.status, 200);
  });

  it('the gate starts with its policy and secret', async () => {
    const g = container('svc-gate', {});
    served.push(await serve(g.args, g.env, undefined, g.cwd));
  });

  it('the trigger starts, and the Control Plane takes its runner token and served repositories', async () => {
    const t = container('svc-trigger', { 'svc-control:47821': control.url });
    const env = { ...t.env, KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(await closedPort()) };
    const trigger = await serve(t.args, env, undefined, t.cwd);
    served.push(trigger);
    assert.equal((await fetch(`${trigger.url}/ready`)).status, 200);
    // Its report at start ships as its SVC_SOURCE, which its runner token's line must name.
    const headers = { authorization: `Bearer ${CONTROL_TOKEN}` };
    const repos = await waitFor(async () => {
      const body = await (await fetch(`${control.url}/v1/repos`, { headers })).json() as
        { items: Array<{ name: string; served_by: string[] }> };
      return body.items.find((r) => r.served_by.includes('trigger'));
    }, 'the trigger\'s served repositories on the Control Plane', 20_000);
    assert.ok(repos.name);
  });
});
