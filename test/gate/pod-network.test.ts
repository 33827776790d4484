// A pod's receipt network section comes from the shared gate: the signer reads the run's records back with the job's
// credential (`/_job/<credential>/_egress`) and vouches for what the gate saw. One job cannot read, or hide among,
// another's records; an unreadable gate gives `confined: false`, never a made-up section. Loopback only.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { mintJobCredential, type JobIdentity } from '../../src/gate/job-credential.ts';
import { podGateNetwork } from '../../src/pod/gate-network.ts';
import { gateRequest, proxyAuth, recordingConnect, startUpstream, tableResolver, type Upstream } from './helpers.ts';

const SECRET = Buffer.from('pod-network-test-secret-0123456789abcdef');
const A: JobIdentity = { job: 'job-a', run: 'run-a', repo: 'acme/a' };
const B: JobIdentity = { job: 'job-b', run: 'run-b', repo: 'acme/a' };
const cred = (who: JobIdentity) => mintJobCredential(SECRET, who, Date.now() + 3600_000);

describe('pod receipt network from the shared gate', () => {
  let upstream: Upstream;
  let gate: Gate;
  const url = (credential: string) => `http://127.0.0.1:${gate.port}/_job/${credential}/_egress`;

  // The run began after the gate started: the gate saw all of it.
  let started = '';

  before(async () => {
    upstream = await startUpstream('127.0.0.2');
    const policy = parseGatePolicy({ allow: ['local.test', `127.0.0.2:${upstream.port}`], deny: ['blocked.test'] });
    gate = await startGate({
      policy, tcpPort: 0, connect: recordingConnect().connect,
      resolve: tableResolver({ 'local.test': ['127.0.0.2'] }).resolve,
      clients: { secret: SECRET, maxPerClient: 8, policyFor: () => policy },
    });
    started = new Date().toISOString();
    const at = { port: gate.port ?? 0 };
    const as = (who: JobIdentity) => ({ headers: proxyAuth(cred(who)) });
    assert.equal((await gateRequest(at, `http://local.test:${upstream.port}/a`, as(A))).status, 200);
    assert.equal((await gateRequest(at, 'http://blocked.test/x', as(A))).status, 403);
    assert.equal((await gateRequest(at, `http://local.test:${upstream.port}/b`, as(B))).status, 200);
  });

  after(async () => {
    await gate.close();
    await upstream.close();
  });

  it("gives the run's own connections, confined, with the policy the gate applied", async () => {
    const got = await podGateNetwork({ SVC_GATE_EVIDENCE_URL: url(cred(A)) }, 'run-a', started);
    assert.equal(got?.problem, null);
    const network = got?.network;
    assert.equal(network?.confined, true);
    assert.equal(network?.connections, 2, "job B's connection is not job A's");
    assert.equal(network?.denied, 1);
    assert.deepEqual(network?.hosts.map((h) => [h.host, h.connections]), [['local.test', 1]]);
    assert.equal(network?.denials[0]?.host, 'blocked.test');
    assert.deepEqual(network?.deny, ['blocked.test']);
    assert.ok(network?.allow.includes('local.test'));
    assert.deepEqual(got?.records.map((r) => [r.run, r.host, r.decision]), [
      ['run-a', 'local.test', 'allowed'], ['run-a', 'blocked.test', 'denied'],
    ]);
  });

  it("never vouches for another run's records: a credential for run B read for run A is refused", async () => {
    const got = await podGateNetwork({ SVC_GATE_EVIDENCE_URL: url(cred(B)) }, 'run-a', started);
    assert.equal(got?.network.confined, false);
    assert.match(got?.problem ?? '', /another run/);
  });

  it('says not confined when the gate refuses the credential, and nothing when the pod has no gate', async () => {
    const forged = await podGateNetwork({ SVC_GATE_EVIDENCE_URL: url('g1.e30.AAAA') }, 'run-a', started);
    assert.equal(forged?.network.confined, false);
    assert.match(forged?.problem ?? '', /407/);
    assert.equal(await podGateNetwork({}, 'run-a', started), null);
  });

  it('reads the records with GET only, and takes span exports with POST only', async () => {
    const at = { port: gate.port ?? 0 };
    const posted = await gateRequest(at, `/_job/${cred(A)}/_egress`, { method: 'POST', body: '{}' });
    assert.equal(posted.status, 405);
    assert.equal(posted.body, 'svc gate: the egress records are read with GET\n');
    const got = await gateRequest(at, `/_job/${cred(A)}/_traces`);
    assert.equal(got.status, 405);
    assert.equal(got.headers.allow, 'POST');
  });
});

describe('pod receipt network from something that is not a whole gate answer', () => {
  it('says not confined, and why, for a body that is not JSON and for one without the gate\'s start', async (t) => {
    const bodies: Record<string, string> = {
      '/text': 'svc gate: hello', '/no-since': JSON.stringify({ run: 'run-a', known: true }),
    };
    const server = createServer((req, res) => res.end(bodies[req.url ?? ''] ?? ''));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.after(() => server.close());
    const { port } = server.address() as AddressInfo;
    const at = (path: string) => ({ SVC_GATE_EVIDENCE_URL: `http://127.0.0.1:${port}${path}` });
    const text = await podGateNetwork(at('/text'), 'run-a', new Date().toISOString());
    assert.equal(text?.network.confined, false);
    assert.equal(text?.problem,
      'the gate\'s records could not be read: the gate answered 200 with something that is not JSON');
    const noSince = await podGateNetwork(at('/no-since'), 'run-a', new Date().toISOString());
    assert.equal(noSince?.problem, 'the gate did not say since when it has kept records');
  });
});
