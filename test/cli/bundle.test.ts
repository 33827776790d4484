import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, mkdirSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { once } from 'node:events';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { waitFor } from '../helpers/wait-for.ts';

const ROOT = join(import.meta.dirname, '../..');
const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const name = `svc-${version}`;
const dir = mkdtempSync(join(tmpdir(), 'svc-'));
const out = join(dir, 'out');
const elsewhere = join(dir, 'elsewhere');
const home = join(dir, 'home');
// The pinned Node first on PATH, then only system directories: no node_modules anywhere near the copy.
const PINNED_PATH = `${dirname(process.execPath)}:/usr/bin:/bin`;
const children: ChildProcess[] = [];

/**
 * Starts `svc control serve --port 0` (or `args`) from a bundle's launcher with only `path` on PATH (and `env`);
 * resolves its URL line.
 */
async function serveBundle(svc: string, path: string, args = ['control', 'serve', '--port', '0'],
  env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(svc, args, { cwd: dir, env: { PATH: path, HOME: home, ...env } });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (c: Buffer) => {
      stdout += c;
      const line = stdout.split('\n')[0];
      if (stdout.includes('\n') && line) resolve(line);
    });
    child.once('exit', (code) => reject(new Error(`serve exited ${code} with PATH=${path}: ${stderr}`)));
  });
  return { child, url };
}

before(() => {
  mkdirSync(elsewhere, { recursive: true });
  mkdirSync(home, { recursive: true });
  const built = spawnSync(process.execPath, [join(ROOT, 'scripts/bundle.js'), '--out', out], { cwd: dir, encoding: 'utf8' });
  assert.equal(built.status, 0, built.stderr);
  // "Copy it to another machine": unpack the tarball somewhere unrelated to the source tree.
  const untar = spawnSync('tar', ['-xzf', join(out, `${name}.tar.gz`), '-C', elsewhere], { encoding: 'utf8' });
  assert.equal(untar.status, 0, untar.stderr);
});

after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function svc(args: string[], path = PINNED_PATH) {
  return spawnSync(join(elsewhere, name, 'bin', 'svc'), args, { cwd: dir, env: { PATH: path, HOME: home }, encoding: 'utf8' });
}

describe('npm run bundle', () => {
  it('writes the folder, a tarball and a sha256 file that matches it', () => {
    for (const rel of ['dist/cli.js', 'dist/client/client.js', 'static/index.html', 'package.json', 'LICENSE', 'README.md', 'bin/svc', 'docs/deploy.md', 'scripts/run.sh', 'scripts/systemd/svc-control.service', 'scripts/container/Containerfile', 'scripts/k8s/control-plane.yaml']) {
      assert.ok(existsSync(join(out, name, rel)), `${rel} missing from the bundle`);
    }
    const archive = readFileSync(join(out, `${name}.tar.gz`));
    const line = readFileSync(join(out, `${name}.tar.gz.sha256`), 'utf8');
    assert.equal(line, `${createHash('sha256').update(archive).digest('hex')}  ${name}.tar.gz\n`);
    assert.ok(statSync(join(elsewhere, name, 'bin', 'svc')).mode & 0o100, 'bin/svc lost its executable bit in the tarball');
  });

  it('ships a package.json without devDependencies, scripts or dependencies', () => {
    const pkg = JSON.parse(readFileSync(join(elsewhere, name, 'package.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(pkg.version, version);
    assert.equal(pkg.devDependencies, undefined);
    assert.equal(pkg.scripts, undefined);
    assert.equal(pkg.dependencies, undefined);
    assert.equal(existsSync(join(elsewhere, name, 'node_modules')), false);
  });

  it('is reproducible: bundling twice gives the same tarball bytes', () => {
    const again = join(dir, 'again');
    const built = spawnSync(process.execPath, [join(ROOT, 'scripts/bundle.js'), '--out', again], { encoding: 'utf8' });
    assert.equal(built.status, 0, built.stderr);
    assert.deepEqual(readFileSync(join(again, `${name}.tar.gz`)), readFileSync(join(out, `${name}.tar.gz`)));
  });
});

describe('the copied folder', () => {
  it('prints the version through bin/svc with no node_modules', () => {
    const r = svc(['--version']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, `${version}\n`);
  });

  it('refuses a Node older than 22.13 with a clear message', (t) => {
    const system = spawnSync('/usr/bin/node', ['--version'], { encoding: 'utf8' });
    const [major = 0, minor = 0] = (system.stdout ?? '').replace('v', '').split('.').map(Number);
    if (system.status !== 0 || major > 22 || (major === 22 && minor >= 13)) return t.skip('no Node older than 22.13 at /usr/bin/node');
    const r = svc(['--version'], '/usr/bin:/bin');
    assert.equal(r.status, 1);
    assert.match(r.stderr, /^svc needs Node\.js >= 22\.13 \(found /);
    // Advice for this folder, which has no checkout to run npm ci in: the launcher's SVC_NODE, or a node/bin/node.
    assert.doesNotMatch(r.stderr, /npm ci|checkout/);
    assert.ok(r.stderr.includes(`point SVC_NODE at a newer node, or put one at ${realpathSync(join(elsewhere, name))}/node/bin/node`), r.stderr);
  });

  it('says so when no node can be found', () => {
    const r = svc(['--version'], join(dir, 'empty-path'));
    assert.equal(r.status, 1);
    assert.match(r.stderr, /node not found/);
  });

  it('runs a command provider from the copied folder, by svc start and by a trigger job, both shipped to its Control '
    + 'Plane', async (t) => {
    if (!bwrapWorks) return t.skip('bwrap cannot run here (svc doctor says why)');
    const svcBin = join(elsewhere, name, 'bin', 'svc');
    const control = await serveBundle(svcBin, PINNED_PATH);
    const env = { PATH: PINNED_PATH, HOME: home, SVC_CONTROL_URL: control.url };
    const project = join(dir, 'project');
    const run = (cmd: string, args: string[]) => spawnSync(cmd, args, { cwd: project, env, encoding: 'utf8' });
    const identity = ['-c', 'user.email=t@example.test', '-c', 'user.name=t'];
    const commit = (message: string) => run('git', [...identity, 'commit', '-q', '--allow-empty', '-m', message]);
    mkdirSync(project);
    assert.equal(run('git', ['init', '-q', '-b', 'main']).status, 0);
    assert.equal(commit('init').status, 0);
    assert.equal(run(svcBin, ['init']).status, 0);
    assert.equal(run('git', ['add', '.svc']).status, 0);
    assert.equal(commit('svc').status, 0);
    const started = run(svcBin, ['start', 'say hello']);
    assert.equal(started.status, 0, started.stderr);
    // The trigger server serves the same checkout from a repositories file, and its job runs the folder's svc start.
    const repos = join(dir, 'repos.conf');
    const added = run(svcBin, ['repos', 'add', '--file', repos, 'acme/api', `checkout=${project}`, 'default']);
    assert.equal(added.status, 0, added.stderr);
    const apiToken = 'bundle-test-api-token-0123456789abcdef';
    const trigger = await serveBundle(svcBin, PINNED_PATH, ['trigger', 'serve', '--port', '0', '--repos', repos],
      { SVC_CONTROL_URL: control.url, SVC_API_TOKEN: apiToken });
    const auth = { authorization: `Bearer ${apiToken}` };
    const queued = await fetch(`${trigger.url}/jobs`, { method: 'POST', headers: { ...auth,
      'content-type': 'application/json' }, body: JSON.stringify({ brief: 'say hello again' }) });
    assert.equal(queued.status, 202);
    const { job_id: job } = await queued.json() as { job_id: string };
    const done = await waitFor(async () => {
      const j = await (await fetch(`${trigger.url}/jobs/${job}`, { headers: auth })).json() as { status: string };
      return ['queued', 'running'].includes(j.status) ? null : j;
    }, 'the trigger job to end');
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    const runs = await waitFor(async () => {
      const list = await (await fetch(`${control.url}/v1/runs`)).json() as { items: Array<{ origin: string }> };
      return list.items.length === 2 ? list.items : null;
    }, 'both runs on the Control Plane');
    assert.deepEqual(runs.map((r) => r.origin).sort(), ['cli', 'jobs']);
    for (const server of [trigger.child, control.child]) {
      server.kill('SIGTERM');
      await once(server, 'exit');
    }
  });

  it('serves the Control Plane from bin/svc control serve --port 0 with /health OK', async () => {
    const { child, url } = await serveBundle(join(elsewhere, name, 'bin', 'svc'), PINNED_PATH);
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${url}/health`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { status: 'ok' });
    const ui = await fetch(`${url}/`);
    assert.equal(ui.status, 200, 'the UI files travel with the bundle');
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
  });

  // Compressing the runtime takes ~20 s quiet and 100 s was seen on a loaded machine: it has ten minutes, not 120 s.
  it('--with-node carries the pinned Node, so bin/svc serves /ready with only the system Node on PATH, or none', {
    timeout: 600_000,
  }, async () => {
    const withNode = join(dir, 'with-node');
    const script = join(ROOT, 'scripts/bundle.js');
    const built = spawnSync(process.execPath, [script, '--out', withNode, '--with-node'], { encoding: 'utf8' });
    assert.equal(built.status, 0, built.stderr);
    // The ~20 s of compressing the runtime is announced, not silent; stdout stays the three result lines.
    assert.match(built.stderr, /^bundle: copying the pinned Node .*\(\d+ MB\)$/m);
    assert.match(built.stderr, /^bundle: compressing svc-.*\.tar\.gz \(gzip -9 of the Node binary: the slow step, /m);
    assert.match(built.stderr, /^bundle: done in \d+\.\d s, /m);
    assert.equal(built.stdout.split('\n').length, 4, built.stdout);
    const folder = join(withNode, name);
    const bundled = realpathSync(join(folder, 'node', 'bin', 'node'));
    // A PATH with no node at all: only what the launcher script itself runs besides shell builtins.
    const bare = join(dir, 'bare-bin');
    mkdirSync(bare, { recursive: true });
    symlinkSync(spawnSync('sh', ['-c', 'command -v dirname'], { encoding: 'utf8' }).stdout.trim(), join(bare, 'dirname'));
    for (const path of ['/usr/bin:/bin', bare]) {
      const { child, url } = await serveBundle(join(folder, 'bin', 'svc'), path);
      assert.equal((await fetch(`${url}/ready`)).status, 200);
      // The launcher execs node in place: the serving process is the bundled runtime, not whatever PATH holds.
      assert.equal(realpathSync(`/proc/${child.pid}/exe`), bundled, `PATH=${path}`);
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      assert.equal(code, 0);
    }
    // SVC_NODE naming an old node: svc on it hands the command to the node/bin/node the folder carries.
    const system = spawnSync('/usr/bin/node', ['-p', 'process.versions.node'], { encoding: 'utf8' });
    const [major = 0, minor = 0] = (system.stdout ?? '').split('.').map(Number);
    if (system.status === 0 && (major < 22 || (major === 22 && minor < 13))) {
      const r = spawnSync(join(folder, 'bin', 'svc'), ['--version'], {
        cwd: dir, env: { PATH: '/usr/bin:/bin', HOME: home, SVC_NODE: '/usr/bin/node' }, encoding: 'utf8',
      });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, `${version}\n`);
    }
  });
});
