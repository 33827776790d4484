// `svc gate serve`: the egress gate as its own process, as Kubernetes job pods use it. Spawned for real
// on 127.0.0.1:0; its upstreams are loopback servers (127.0.0.2 named exactly in the policy, 127.0.0.1 not).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, request, type Server, type IncomingHttpHeaders } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { mintJobCredential } from '../../src/gate/job-credential.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');
const REAL_KEY = 'sk-ant-gate-serve-real-1c2d';
const SECRET = 'gate-serve-test-secret-0123456789abcdef';
const CREDENTIAL = mintJobCredential(Buffer.from(SECRET), { job: 'j-serve', run: 'r-serve', repo: 'acme/web' },
  Date.now() + 3600_000);
const AUTH = { 'proxy-authorization': `Basic ${Buffer.from(`svc:${CREDENTIAL}`).toString('base64')}` };

/** A loopback server; `body` what it answers (a model API's answer carries usage the gate meters). */
function upstream(host: string, seen: IncomingHttpHeaders[], body = 'upstream'): Promise<Server> {
  const server = createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    if (body !== 'upstream') res.setHeader('content-type', 'application/json');
    res.end(body);
  });
  return new Promise((resolve) => server.listen(0, host, () => resolve(server)));
}

const addr = (s: Server) => `${(s.address() as AddressInfo).address}:${(s.address() as AddressInfo).port}`;

/** One request to the gate: absolute-form (`target` a URL) or origin-form (a /_model/ path). */
function viaGate(gatePort: number, target: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: gatePort, method: 'GET', path: target, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('svc gate serve', () => {
  let dir: string;
  let allowed: Server;
  let loopback: Server;
  let model: Server;
  let gate: ChildProcess;
  let port = 0;
  let out = '';
  const allowedSeen: IncomingHttpHeaders[] = [];
  const loopbackSeen: IncomingHttpHeaders[] = [];
  const modelSeen: IncomingHttpHeaders[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-gate-serve-'));
    allowed = await upstream('127.0.0.2', allowedSeen);
    loopback = await upstream('127.0.0.1', loopbackSeen);
    // $0.15 a call by svc's price table.
    model = await upstream('127.0.0.1', modelSeen,
      JSON.stringify({ model: 'claude-sonnet-4-5', usage: { input_tokens: 0, output_tokens: 10_000 } }));
    writeFileSync(join(dir, 'policy.json'), JSON.stringify({ allow: [addr(allowed)] }));
    writeFileSync(join(dir, 'gate-secret'), `${SECRET}\n`, { mode: 0o600 });
    gate = spawn(process.execPath, [CLI, 'gate', 'serve', '--port', '0', '--policy', join(dir, 'policy.json')], {
      env: {
        PATH: process.env.PATH, HOME: dir, ANTHROPIC_API_KEY: REAL_KEY, ANTHROPIC_BASE_URL: `http://${addr(model)}`,
        SVC_GATE_SECRET_FILE: join(dir, 'gate-secret'), SVC_BUDGET_REPO_DAY_USD: '0.4',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    gate.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
    port = Number(await waitFor(() => /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1], 'the gate to listen'));
  });
  after(() => {
    gate.kill('SIGTERM');
    allowed.close();
    loopback.close();
    model.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a client without its job credential with 407, spending nothing', async () => {
    assert.equal(await viaGate(port, `http://${addr(allowed)}/x`), 407);
    assert.equal(await viaGate(port, '/_model/anthropic/v1/messages'), 407);
    assert.equal(allowedSeen.length + modelSeen.length, 0);
  });

  it('forwards what the policy names, refuses a loopback address it does not, and logs both', async () => {
    assert.equal(await viaGate(port, `http://${addr(allowed)}/x`, AUTH), 200);
    assert.equal(allowedSeen.length, 1);
    assert.equal(await viaGate(port, `http://${addr(loopback)}/x`, AUTH), 403);
    assert.equal(loopbackSeen.length, 0);
    // The child writes its log lines on its own time, and the test before left 407 lines: wait for this test's two.
    const allowedLine = /"egress":\{[^\n]*"decision":"allowed"[^\n]*"job":"j-serve","run":"r-serve","repo":"acme\/web"/;
    const loopbackLine = /"egress":\{[^\n]*"decision":"denied"[^\n]*"status":403/;
    await waitFor(() => allowedLine.test(out) && loopbackLine.test(out), 'the allowed and the refused line');
  });

  it('adds the real model key in place of the placeholder, for the model host only', async () => {
    const status = await viaGate(port, `/_job/${CREDENTIAL}/_model/anthropic/v1/messages`,
      { 'x-api-key': 'sk-ant-svc-gate-placeholder' });
    assert.equal(status, 200);
    assert.equal(modelSeen.at(-1)?.['x-api-key'], REAL_KEY);
    assert.ok(allowedSeen.every((h) => h['x-api-key'] === undefined));
  });

  it('meters its jobs\' model calls and refuses a repository\'s past its daily cap, another repository\'s not', async () => {
    const call = (credential: string) => viaGate(port, `/_job/${credential}/_model/anthropic/v1/messages`);
    const statuses: number[] = [];
    for (let i = 0; i < 5 && statuses.at(-1) !== 429; i++) statuses.push(await call(CREDENTIAL));
    // The test before made one call of acme/web's ($0.15): two more bring it to $0.45, past $0.40; the next is refused.
    assert.deepEqual(statuses, [200, 200, 429]);
    const seen = modelSeen.length;
    assert.equal(await call(CREDENTIAL), 429);
    assert.equal(modelSeen.length, seen, 'a refused call never reaches the model API');
    const other = mintJobCredential(Buffer.from(SECRET), { job: 'j-2', run: 'r-2', repo: 'acme/api' }, Date.now() + 3600_000);
    assert.equal(await call(other), 200);
    const refused = /"egress":\{[^\n]*"reason":"the daily budget of \$0\.40 for acme\/web is reached[^\n]*"status":429/;
    const metered = /"egress":\{[^\n]*"metered":\{"model":"claude-sonnet-4-5","tokens_in":0,"tokens_out":10000,/;
    await waitFor(() => refused.test(out) && metered.test(out), 'the refused and the metered line');
  });

  it('refuses a malformed policy file with exit 2', async () => {
    writeFileSync(join(dir, 'bad.json'), JSON.stringify({ allow: ['http://nope/'] }));
    const res = await runChild(process.execPath, [CLI, 'gate', 'serve', '--port', '0', '--policy', join(dir, 'bad.json')],
      { env: { PATH: process.env.PATH, HOME: dir, SVC_GATE_SECRET_FILE: join(dir, 'gate-secret') } });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /Gate policy: Network pattern "http:\/\/nope\/"/);
  });

  it('refuses a policy file that is not JSON with exit 2, naming the file', async () => {
    writeFileSync(join(dir, 'broken.json'), '{"allow": [');
    const res = await runChild(process.execPath,
      [CLI, 'gate', 'serve', '--port', '0', '--policy', join(dir, 'broken.json')],
      { env: { PATH: process.env.PATH, HOME: dir, SVC_GATE_SECRET_FILE: join(dir, 'gate-secret') } });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /Gate policy: \S*broken\.json is not JSON \(/);
  });

  it('refuses a policy file it cannot read with exit 2, naming the file', async () => {
    const res = await runChild(process.execPath,
      [CLI, 'gate', 'serve', '--port', '0', '--policy', join(dir, 'absent.json')],
      { env: { PATH: process.env.PATH, HOME: dir, SVC_GATE_SECRET_FILE: join(dir, 'gate-secret') } });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /Gate policy: \S*absent\.json cannot be read \(ENOENT/);
  });

  // ESM linking errors are SyntaxErrors: the policy's are told apart by their class, not by being one.
  it('reports a forwarding module it cannot link as what it is, not as a policy error (exit 1)', async () => {
    const program = `import { registerHooks } from 'node:module';
      registerHooks({ load(url, context, next) {
        if (url.endsWith('/src/gate/forward.ts')) throw new SyntaxError('forward.ts has no export named x');
        return next(url, context);
      } });
      process.argv = [process.argv[0], 'svc', 'gate', 'serve', '--port', '0'];
      await import(${JSON.stringify(join(import.meta.dirname, '../../src/cli.ts'))});`;
    const res = await runChild(process.execPath, ['--input-type=module', '-e', program],
      { env: { PATH: process.env.PATH, HOME: dir, SVC_GATE_SECRET_FILE: join(dir, 'gate-secret') } });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /svc gate: forward\.ts has no export named x/);
    assert.doesNotMatch(res.stderr, /Gate policy/);
    assert.doesNotMatch(res.stdout, /listening/, 'it never said it served');
  });

  it('will not start without the credential secret, or with a short one (exit 2)', async () => {
    const none = await runChild(process.execPath, [CLI, 'gate', 'serve', '--port', '0'],
      { env: { PATH: process.env.PATH, HOME: dir } });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /SVC_GATE_SECRET_FILE is required/);
    const make = /Make one \(openssl rand -hex 32 > FILE, mode 0600\) and give the trigger server the same file/;
    assert.match(none.stderr, make);
    writeFileSync(join(dir, 'short-secret'), 'short\n');
    const short = await runChild(process.execPath, [CLI, 'gate', 'serve', '--port', '0'],
      { env: { PATH: process.env.PATH, HOME: dir, SVC_GATE_SECRET_FILE: join(dir, 'short-secret') } });
    assert.notEqual(short.code, 0);
    assert.match(short.stderr, /at least 32 bytes/);
  });

  it('names a taken port as the other servers do and suggests --port 0 (exit 1), not Node\'s EADDRINUSE', async () => {
    const env = { PATH: process.env.PATH, HOME: dir, SVC_GATE_SECRET_FILE: join(dir, 'gate-secret') };
    const taken = await runChild(process.execPath, [CLI, 'gate', 'serve', '--port', String(port)], { env });
    assert.equal(taken.code, 1);
    assert.match(taken.stderr, new RegExp(`^svc gate: Port ${port} on 127\\.0\\.0\\.1 is already in use .*` +
      'or run this one on a free port: svc gate serve --port 0\n$', 'm'));
  });

  it('ends with exit 0 on SIGTERM', async () => {
    const exited = new Promise<number | null>((resolve) => gate.on('exit', (code) => resolve(code)));
    gate.kill('SIGTERM');
    assert.equal(await exited, 0);
  });
});
