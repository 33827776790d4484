import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bwrapArgv } from '../../src/spawn/bwrap-argv.ts';
import { DEFAULT_LIMITS } from '../../src/spawn/limits.ts';

const SCRIPTS = join(import.meta.dirname, '../../scripts');
const read = (rel: string) => readFileSync(join(SCRIPTS, rel), 'utf8');
const temps: string[] = [];
after(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

/** `Key=value` lines of a unit file, in order (comments and sections dropped). */
function directives(unit: string): Array<[string, string]> {
  return unit.split('\n').filter((l) => /^[A-Za-z]+=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]);
}

const HARDENING: Array<[string, RegExp]> = [
  ['NoNewPrivileges', /^yes$/], ['ProtectSystem', /^strict$/], ['ProtectHome', /^yes$/], ['BindPaths', /^\/var\/lib\/svc\/tmp:\/tmp$/],
  ['StateDirectory', /^svc\b/], ['User', /^svc$/], ['UMask', /^0077$/], ['CapabilityBoundingSet', /^$/],
];

/** The namespaces (systemd's names) an agent's bwrap creates: its argv's --unshare-* flags, and always mnt. */
function sandboxNamespaces(): string[] {
  const plan = {
    readable: [], writable: [], protect: [], hidden: [], protocolReadable: [], protocolWritable: [], home: null,
    cwd: '/', limits: DEFAULT_LIMITS, network: 'none' as const,
  };
  const argv = bwrapArgv('/usr/bin/bwrap', plan, ['true']);
  assert.ok(!argv.includes('--unshare-all'), 'name each namespace, so the units can be checked against it');
  const unshared = argv.flatMap((a) => /^--unshare-([a-z]+?)(-try)?$/.exec(a)?.[1] ?? []);
  return ['mnt', ...new Set(unshared)];
}

function systemdAnalyze(): boolean {
  return spawnSync('systemd-analyze', ['--version']).status === 0;
}

for (const [unit, command] of [['svc-control.service', 'control serve'], ['svc-trigger.service', 'trigger serve']] as const) {
  describe(`systemd ${unit}`, () => {
    const text = read(`systemd/${unit}`);
    const kv = directives(text);
    const get = (key: string) => kv.filter(([k]) => k === key).map(([, v]) => v);

    it('runs the bundle launcher with the right subcommand', () => {
      assert.deepEqual(get('ExecStart'), [`/opt/svc/bin/svc ${command}`]);
    });

    it('is hardened and keeps state under StateDirectory', () => {
      for (const [key, value] of HARDENING) assert.ok(get(key).some((v) => value.test(v)), `${key} should match ${value}`);
      assert.ok(get('Environment').some((v) => v === 'HOME=/var/lib/svc'));
      assert.deepEqual(get('ReadWritePaths'), ['-/srv/svc']);
    });

    it('lets the agent sandbox run: every namespace bwrap unshares, netlink, and no overmounted /proc', () => {
      // bwrap needs every namespace svc's argv unshares (and always a mount one), a netlink socket to bring up the
      // loopback of its network namespace, and a fresh proc mount, which the kernel refuses while /proc/sys or
      // /proc/kmsg are overmounted (ProtectKernelTunables, ProtectKernelLogs).
      const namespaces = sandboxNamespaces();
      assert.ok(namespaces.includes('net') && namespaces.includes('user'), namespaces.join(' '));
      for (const restrict of get('RestrictNamespaces')) {
        const allowed = restrict.split(/\s+/);
        for (const ns of namespaces) assert.ok(allowed.includes(ns), `RestrictNamespaces=${restrict} refuses ${ns}`);
      }
      for (const families of get('RestrictAddressFamilies')) assert.match(families, /(^|\s)AF_NETLINK(\s|$)/);
      for (const filter of get('SystemCallFilter')) assert.match(filter, /@mount/);
      assert.deepEqual(get('ProtectKernelTunables'), ['no']);
      assert.deepEqual(get('ProtectKernelLogs'), ['no']);
      assert.deepEqual(get('ProcSubset'), []);
      assert.deepEqual(get('PrivateUsers'), []);
      assert.deepEqual(get('ProtectProc'), ['invisible']);
    });

    it('signals only the server on stop, so the runs it started keep going (docs/deploy.md "Upgrading")', () => {
      // Run workers are detached but stay in the unit's cgroup: control-group or mixed would end them too.
      assert.deepEqual(get('KillMode'), ['process']);
      // systemd removes PrivateTmp's /tmp at the stop, under the runs that go on: /tmp is a state folder instead.
      assert.deepEqual(get('PrivateTmp'), []);
      assert.deepEqual(get('BindPaths'), ['/var/lib/svc/tmp:/tmp']);
      assert.ok(get('StateDirectory').some((v) => v.split(/\s+/).includes('svc/tmp')));
    });

    it('takes secrets from EnvironmentFile or LoadCredential, never inline', () => {
      assert.ok(get('EnvironmentFile').length === 1);
      for (const env of get('Environment')) assert.doesNotMatch(env, /(TOKEN|SECRET|API_KEY)=/, `secret inline: ${env}`);
    });

    it('passes systemd-analyze verify', (t) => {
      if (!systemdAnalyze()) return t.skip('systemd-analyze is not installed');
      const dir = mkdtempSync(join(tmpdir(), 'svc-'));
      temps.push(dir);
      // verify checks that ExecStart exists: point it at a stand-in launcher.
      writeFileSync(join(dir, 'svc'), '#!/bin/sh\n');
      chmodSync(join(dir, 'svc'), 0o755);
      writeFileSync(join(dir, unit), text.replace('/opt/svc/bin/svc', join(dir, 'svc')));
      const r = spawnSync('systemd-analyze', ['verify', `./${unit}`], { cwd: dir, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stderr.trim(), '', 'systemd-analyze warned');
    });
  });
}

describe('systemd answer folder', () => {
  it('gives both services the same SVC_CONTROL_ANSWER_DIR, so answers reach runs the trigger started', () => {
    const dirs = ['svc-control.service', 'svc-trigger.service'].map((u) => /^Environment=SVC_CONTROL_ANSWER_DIR=(\S+)$/m.exec(read(`systemd/${u}`))?.[1]);
    assert.ok(dirs[0], 'svc-control.service sets SVC_CONTROL_ANSWER_DIR');
    assert.equal(dirs[1], dirs[0]);
  });
});

describe('systemd svc-trigger.service repositories', () => {
  it('serves the repositories file in its state folder, which a shorthand checkout would silently override', async () => {
    const text = read('systemd/svc-trigger.service');
    const env = Object.fromEntries(directives(text).filter(([k]) => k === 'Environment').map(([, v]) => {
      const at = v.indexOf('=');
      return [v.slice(0, at), v.slice(at + 1)];
    }));
    assert.equal(env.SVC_TRIGGER_REPO, undefined, 'SVC_TRIGGER_REPO wins over the file');
    assert.equal(env.SVC_TRIGGER_REPOS, '/var/lib/svc/trigger/repos.conf');
    assert.match(text, /^StateDirectory=.*\bsvc\/trigger\b/m);
    // The unit's environment, moved into a temp root: the server reads the file `svc repos add --file` wrote.
    const root = mkdtempSync(join(tmpdir(), 'svc-unit-'));
    temps.push(root);
    const moved = (v: string) => v.replace('/var/lib/svc', root);
    const file = moved(env.SVC_TRIGGER_REPOS!);
    const checkout = join(root, 'srv', 'api');
    spawnSync('git', ['init', '-q', checkout]);
    const cli = join(import.meta.dirname, '../../dist/cli.js');
    const added = spawnSync(process.execPath, [cli, 'repos', 'add', 'acme/api', `checkout=${checkout}`, 'default',
      '--file', file], { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: root } });
    assert.equal(added.status, 0, added.stderr);
    const { resolveTriggerSettings } = await import('../../src/trigger/settings.ts');
    const settings = resolveTriggerSettings({ HOME: moved(env.HOME!), SVC_TRIGGER_REPOS: file }, {}, root);
    assert.equal(settings.repos.source, file);
    assert.deepEqual(settings.repos.entries.map((e) => e.name), ['acme/api']);
  });
});

describe('systemd svc-trigger.service credentials', () => {
  it('loads the /jobs token as a credential and points SVC_API_TOKEN_FILE at it', () => {
    const text = read('systemd/svc-trigger.service');
    assert.match(text, /^LoadCredential=api-token:\/etc\/svc\/credentials\/api-token$/m);
    assert.match(text, /^Environment=SVC_API_TOKEN_FILE=%d\/api-token$/m);
  });

  it('gives the trigger a runner token for its source, which the Control Plane unit loads', () => {
    // Without one the trigger's reports and its runs' batches are refused (401) for ever.
    const trigger = read('systemd/svc-trigger.service');
    assert.match(trigger, /^LoadCredential=control-token:\/etc\/svc\/credentials\/trigger-control-token$/m);
    assert.match(trigger, /^Environment=SVC_CONTROL_TOKEN_FILE=%d\/control-token$/m);
    assert.match(trigger, /^Environment=SVC_SOURCE=trigger$/m);
    assert.match(trigger, /^Environment=SVC_CONTROL_URL=http:\/\/127\.0\.0\.1:47821$/m);
    const control = read('systemd/svc-control.service');
    assert.match(control, /^LoadCredential=runner-tokens:\/etc\/svc\/credentials\/runner-tokens$/m);
    assert.match(control, /^Environment=SVC_CONTROL_RUNNER_TOKENS_FILE=%d\/runner-tokens$/m);
  });
});

describe('container file', () => {
  const text = read('container/Containerfile');

  it('runs as a non-root user', () => {
    const users = [...text.matchAll(/^USER\s+(\S+)/gm)].map((m) => m[1]);
    assert.ok(users.length > 0);
    assert.doesNotMatch(users.at(-1)!, /^(0|root)(:|$)/);
  });

  it('checks /health with node fetch and keeps data on a volume', () => {
    assert.match(text, /^HEALTHCHECK [^\n]*(\\\n[^\n]*)*CMD \["node", "-e", "[^"]*fetch\(process\.env\.SVC_HEALTH_URL\)/m);
    assert.match(text, /SVC_HEALTH_URL=http:\/\/127\.0\.0\.1:47821\/health/);
    assert.match(text, /^VOLUME \["\/var\/lib\/svc"\]$/m);
    assert.match(text, /^COPY .* \/opt\/svc\/$/m);
  });

  it('starts svc under tini, an init that reaps the orphans re-parented to PID 1 (node never does)', () => {
    assert.match(text, /apt-get install -y --no-install-recommends [^\n]*\btini\b/);
    assert.match(text, /^ENTRYPOINT \["\/usr\/bin\/tini", "--", "\/opt\/svc\/bin\/svc"\]$/m);
  });

  it('installs git and curl, which a run in a job pod needs (worktrees; fetching an issue for svc start)', () => {
    assert.match(text, /apt-get install -y --no-install-recommends [^\n]*\bgit\b[^\n]*\bcurl\b/);
  });

  it('is built with --format docker wherever a podman build is shown, so the HEALTHCHECK survives', () => {
    const deploy = readFileSync(join(SCRIPTS, '../docs/deploy.md'), 'utf8');
    const builds = [...`${text}\n${deploy}`.matchAll(/podman build[^\n]*/g)].map((m) => m[0]);
    assert.ok(builds.length >= 2, 'the Containerfile and docs/deploy.md both show the build command');
    for (const build of builds) assert.match(build, /--format docker/, build);
  });
});

/** Splits a multi-document YAML file and returns each document's text keyed by kind. */
function docsByKind(file: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const doc of readFileSync(join(SCRIPTS, 'k8s', file), 'utf8').split(/^---$/m)) {
    const kind = /^kind: (\w+)$/m.exec(doc)?.[1];
    if (kind) out.set(kind, [...(out.get(kind) ?? []), doc]);
  }
  return out;
}

describe('kubernetes manifests', () => {
  it('are simple YAML: spaces only, two-space indentation', () => {
    for (const file of ['control-plane.yaml', 'trigger.yaml']) {
      readFileSync(join(SCRIPTS, 'k8s', file), 'utf8').split('\n').forEach((line, i) => {
        assert.doesNotMatch(line, /\t/, `${file}:${i + 1} has a tab`);
        assert.equal((/^ */.exec(line)![0].length) % 2, 0, `${file}:${i + 1} odd indentation`);
      });
    }
  });

  it('run the Control Plane as a Deployment with a Service, a PersistentVolumeClaim, probes and a token Secret', () => {
    const docs = docsByKind('control-plane.yaml');
    for (const kind of ['Deployment', 'Service', 'PersistentVolumeClaim']) assert.ok(docs.has(kind), `${kind} missing`);
    const dep = docs.get('Deployment')![0]!;
    assert.match(dep, /livenessProbe:\n\s+httpGet:\n\s+path: \/health/);
    assert.match(dep, /readinessProbe:\n\s+httpGet:\n\s+path: \/ready/);
    assert.match(dep, /- name: SVC_CONTROL_HOST\n\s+value: "0\.0\.0\.0"/);
    assert.match(dep, /- name: SVC_CONTROL_TOKEN\n\s+valueFrom:\n\s+secretKeyRef:/);
    assert.match(dep, /claimName: svc-control-data/);
    assert.match(dep, /runAsNonRoot: true/);
    assert.match(dep, /replicas: 1\n\s+strategy:\n\s+type: Recreate/);
  });

  it('run the trigger server with the Kubernetes executor and only the RBAC it needs', () => {
    const docs = docsByKind('trigger.yaml');
    for (const kind of ['Deployment', 'Service', 'PersistentVolumeClaim', 'ServiceAccount', 'Role', 'RoleBinding']) assert.ok(docs.has(kind), `${kind} missing`);
    const dep = docs.get('Deployment')![0]!;
    assert.match(dep, /- name: SVC_TRIGGER_EXECUTOR\n\s+value: kubernetes/);
    assert.match(dep, /serviceAccountName: svc-trigger/);
    // The pods' two runner tokens, never one: the run container's agent may hold only the `bound-runs` one.
    assert.match(dep, /- name: SVC_K8S_CONTROL_TOKEN_SECRET\n\s+value: svc-control-pods/);
    assert.match(dep, /- name: SVC_K8S_RUN_CONTROL_TOKEN_SECRET\n\s+value: svc-control-run/);
    assert.match(readFileSync(join(SCRIPTS, 'k8s', 'trigger.yaml'), 'utf8'), /`trigger <token> read=k8s`/);
    assert.match(dep, /livenessProbe:\n\s+httpGet:\n\s+path: \/health/);
    assert.match(dep, /readinessProbe:\n\s+httpGet:\n\s+path: \/ready/);
    const role = docs.get('Role')![0]!;
    assert.match(role, /resources: \["jobs"\]\n\s+verbs: \["create", "get", "list", "watch", "patch", "delete"\]/);
    assert.doesNotMatch(role, /secrets|"\*"/);
  });
});
