// A shared gate (`svc gate serve`) knows who is asking. Each attack here is a client of the shared gate: one with no
// credential, a forged or expired one, one job trying another job's repository policy or another job's connection,
// and one job (or one pod without a credential) flooding the connection limit while another job still gets through.
// Upstreams are loopback servers; "pods" are distinct loopback source addresses.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect as netConnect, type Socket } from 'node:net';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy, type GatePolicy } from '../../src/gate/policy.ts';
import { modelRoute } from '../../src/gate/model-apis.ts';
import { mintJobCredential, verifyJobCredential, type JobIdentity } from '../../src/gate/job-credential.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import {
  gateConnect, gateRequest, proxyAuth, recordingConnect, startUpstream, tableResolver, type Reply, type Upstream,
} from './helpers.ts';

const SECRET = Buffer.from('clients-test-secret-0123456789abcdef0123456789');
const HOUR = 3600_000;
const JOB_A: JobIdentity = { job: 'job-a', run: 'run-a', repo: 'acme/a' };
const JOB_B: JobIdentity = { job: 'job-b', run: 'run-b', repo: 'acme/b' };
const cred = (who: JobIdentity, secret = SECRET, expires = Date.now() + HOUR) =>
  mintJobCredential(secret, who, expires);

/** Opens a TCP connection to the gate from `localAddress` and keeps it, saying nothing. */
function idleSocket(port: number, localAddress = '127.0.0.1'): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ port, host: '127.0.0.1', localAddress });
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

describe('shared gate clients', () => {
  const records: EgressRecord[] = [];
  let upstream: Upstream;
  let model: Upstream;
  let gate: Gate;
  let at: { port: number };

  before(async () => {
    upstream = await startUpstream('127.0.0.2');
    model = await startUpstream('127.0.0.2');
    const { resolve } = tableResolver({ 'local.test': ['127.0.0.2'] });
    const modelAllow = `127.0.0.2:${model.port}`;
    const policies = new Map<string, GatePolicy>([
      ['acme/a', parseGatePolicy({ allow: ['local.test', `127.0.0.2:${upstream.port}`, modelAllow] })],
    ]);
    const fallback = parseGatePolicy({ allow: [modelAllow] });
    gate = await startGate({
      policy: fallback, tcpPort: 0, resolve, connect: recordingConnect().connect, onRecord: (r) => records.push(r),
      models: [modelRoute('openai', `http://127.0.0.2:${model.port}/v1`, 'authorization', 'Bearer sk-REAL')],
      clients: { secret: SECRET, maxPerClient: 3, policyFor: (who) => policies.get(who.repo) ?? fallback },
      limits: { maxConnections: 12, maxConnectionsPerPeer: 8 },
    });
    at = { port: gate.port ?? 0 };
  });

  after(async () => {
    await gate.close();
    await upstream.close();
    await model.close();
  });

  it('refuses anonymous clients 407 with a challenge, on every mode, before deciding anything', async () => {
    const seen = upstream.seen.length + model.seen.length;
    const plain = await gateRequest(at, `http://local.test:${upstream.port}/x`);
    assert.equal(plain.status, 407);
    assert.equal(plain.headers['proxy-authenticate'], 'Basic realm="svc gate"');
    assert.equal(((await gateConnect(at, `local.test:${upstream.port}`)) as Reply).status, 407);
    const viaModel = await gateRequest(at, '/_model/openai/chat/completions', { method: 'POST', body: '{}' });
    assert.equal(viaModel.status, 407);
    assert.equal(upstream.seen.length + model.seen.length, seen, 'no model key was spent');
    assert.equal(records.at(-1)?.status, 407);
    assert.equal(records.at(-1)?.decision, 'denied');
  });

  it('refuses a forged, re-signed, expired or tampered credential, or one with an invalid budget', async () => {
    const good = cred(JOB_A);
    const [prefix, payload, mac] = good.split('.');
    const otherPayload = Buffer.from(JSON.stringify({ ...JOB_B, repo: 'acme/a', exp: Date.now() + HOUR }))
      .toString('base64url');
    const bad = [
      cred(JOB_A, Buffer.from('another-secret-another-secret-another-secret')),
      cred(JOB_A, SECRET, Date.now() - 1),
      `${prefix}.${otherPayload}.${mac}`,
      `${prefix}.${payload}.${mac?.slice(0, -2)}AA`,
      'svc-gate-placeholder',
      // Signed with a budget claim the gate could not hold a run to: refused, never read as "no budget".
      ...[0, -1, Number.NaN, 'lots', null].map((usd) => cred({ ...JOB_A, maxUsd: usd as number })),
    ];
    for (const credential of bad) {
      const reply = await gateRequest(at, `http://local.test:${upstream.port}/x`, { headers: proxyAuth(credential) });
      assert.equal(reply.status, 407, credential);
    }
    assert.equal(verifyJobCredential(SECRET, good)?.job, 'job-a');
  });

  it("applies the credential's own repository policy and attributes every record to its run", async () => {
    const allowed = await gateRequest(at, `http://local.test:${upstream.port}/a`, { headers: proxyAuth(cred(JOB_A)) });
    assert.equal(allowed.status, 200);
    const record = records.find((r) => r.run === 'run-a' && r.kind === 'http');
    assert.deepEqual([record?.job, record?.repo, record?.decision], ['job-a', 'acme/a', 'allowed']);
    const other = await gateRequest(at, `http://local.test:${upstream.port}/b`, { headers: proxyAuth(cred(JOB_B)) });
    assert.equal(other.status, 403, "job B's repository does not allow local.test");
    assert.equal(records.at(-1)?.run, 'run-b');
  });

  it('takes the credential from a /_job/ prefix on model requests and sends the path without it', async () => {
    const reply = await gateRequest(at, `/_job/${cred(JOB_B)}/_model/openai/chat/completions`, {
      method: 'POST', body: '{}', headers: { authorization: 'Bearer svc-gate-placeholder' },
    });
    assert.equal(reply.status, 200);
    const seen = model.seen.at(-1);
    assert.equal(seen?.url, '/v1/chat/completions');
    assert.equal(seen?.headers.authorization, 'Bearer sk-REAL');
    assert.equal(records.at(-1)?.model, 'openai');
    assert.equal(records.at(-1)?.run, 'run-b');
    assert.equal((await gateRequest(at, '/_job/nonsense/_model/openai/x')).status, 407);
  });

  it("refuses a request that uses another job's credential on a connection a job already holds", async () => {
    const socket = await idleSocket(at.port);
    const answers = await new Promise<string>((resolve) => {
      let text = '';
      socket.setEncoding('latin1');
      socket.on('data', (d: string) => (text += d));
      socket.on('close', () => resolve(text));
      const auth = (who: JobIdentity) => proxyAuth(cred(who))['proxy-authorization'];
      socket.write(`GET http://local.test:${upstream.port}/one HTTP/1.1\r\nHost: local.test\r\n` +
        `Proxy-Authorization: ${auth(JOB_A)}\r\n\r\n` +
        `GET http://local.test:${upstream.port}/two HTTP/1.1\r\nHost: local.test\r\n` +
        `Proxy-Authorization: ${auth(JOB_B)}\r\n\r\n`);
    });
    assert.match(answers, /^HTTP\/1\.1 200 /);
    assert.match(answers, /HTTP\/1\.1 407 [^]*belongs to another job/);
  });

  it('holds one job to its share of connections while another job still connects', async () => {
    const flood: Socket[] = [];
    const refusals: Reply[] = [];
    try {
      // Job A asks for every connection the gate has (12) and keeps each tunnel it gets.
      for (let i = 0; i < 12; i++) {
        const opened = await gateConnect(at, `local.test:${upstream.port}`, proxyAuth(cred(JOB_A)));
        if ('socket' in opened) flood.push(opened.socket);
        else refusals.push(opened);
      }
      assert.equal(flood.length, 3, 'job A holds its share, no more');
      assert.ok(refusals.every((r) => r.status === 429 && /its share/.test(r.body)));
      const other = await gateRequest(at, `http://127.0.0.2:${model.port}/b`, { headers: proxyAuth(cred(JOB_B)) });
      assert.equal(other.status, 200, 'job B is not starved');
    } finally {
      for (const s of flood) s.destroy();
    }
  });

  it('bounds what one pod holds before it names a job, so another pod still connects', async () => {
    const idle: Socket[] = [];
    try {
      for (let i = 0; i < 8; i++) idle.push(await idleSocket(at.port, '127.0.0.5'));
      const refused = await idleSocket(at.port, '127.0.0.5');
      const closed = await new Promise<boolean>((resolve) => {
        refused.on('close', () => resolve(true));
        refused.on('data', () => resolve(false));
        refused.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      });
      assert.equal(closed, true, 'the ninth connection from that pod is closed');
      const other = await gateRequest({ ...at, localAddress: '127.0.0.6' }, `http://127.0.0.2:${model.port}/c`, {
        headers: proxyAuth(cred(JOB_B)),
      });
      assert.equal(other.status, 200);
    } finally {
      for (const s of idle) s.destroy();
    }
  });
});
