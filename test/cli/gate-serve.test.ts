// `svc gate serve` (issue 20 §7): the egress gate as its own process, as Kubernetes job pods use it. Spawned for real
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

const CLI = join(import.meta.dirname, '../../dist/cli.js');
const REAL_KEY = 'sk-ant-gate-serve-real-1c2d';

function upstream(host: string, seen: IncomingHttpHeaders[]): Promise<Server> {
  const server = createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    res.end('upstream');
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
    model = await upstream('127.0.0.1', modelSeen);
    writeFileSync(join(dir, 'policy.json'), JSON.stringify({ allow: [addr(allowed)] }));
    gate = spawn(process.execPath, [CLI, 'gate', 'serve', '--port', '0', '--policy', join(dir, 'policy.json')], {
      env: { PATH: process.env.PATH, HOME: dir, ANTHROPIC_API_KEY: REAL_KEY, ANTHROPIC_BASE_URL: `http://${addr(model)}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    gate.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
    for (let i = 0; i < 200 && !/listening on http:\/\/127\.0\.0\.1:(\d+)/.test(out); i++) {
      await new Promise((r) => setTimeout(r, 25));
    }
    port = Number(/listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1]);
    assert.ok(port > 0, out);
  });
  after(() => {
    gate.kill('SIGTERM');
    allowed.close();
    loopback.close();
    model.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('forwards what the policy names, refuses a loopback address it does not, and logs both', async () => {
    assert.equal(await viaGate(port, `http://${addr(allowed)}/x`), 200);
    assert.equal(allowedSeen.length, 1);
    assert.equal(await viaGate(port, `http://${addr(loopback)}/x`), 403);
    assert.equal(loopbackSeen.length, 0);
    // The child writes its log lines on its own time: wait for the second one.
    for (let i = 0; i < 200 && !/"decision":"denied"/.test(out); i++) await new Promise((r) => setTimeout(r, 25));
    assert.match(out, /"egress":\{[^\n]*"decision":"allowed"/);
    assert.match(out, /"egress":\{[^\n]*"decision":"denied"/);
  });

  it('adds the real model key in place of the placeholder, for the model host only', async () => {
    const status = await viaGate(port, '/_model/anthropic/v1/messages', { 'x-api-key': 'sk-ant-svc-gate-placeholder' });
    assert.equal(status, 200);
    assert.equal(modelSeen.at(-1)?.['x-api-key'], REAL_KEY);
    assert.ok(allowedSeen.every((h) => h['x-api-key'] === undefined));
  });

  it('refuses a malformed policy file with exit 2', async () => {
    writeFileSync(join(dir, 'bad.json'), JSON.stringify({ allow: ['http://nope/'] }));
    const res = await runChild(process.execPath, [CLI, 'gate', 'serve', '--port', '0', '--policy', join(dir, 'bad.json')],
      { env: { PATH: process.env.PATH, HOME: dir } });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /Gate policy: Network pattern "http:\/\/nope\/"/);
  });

  it('ends with exit 0 on SIGTERM', async () => {
    const exited = new Promise<number | null>((resolve) => gate.on('exit', (code) => resolve(code)));
    gate.kill('SIGTERM');
    assert.equal(await exited, 0);
  });
});
