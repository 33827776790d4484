// The attacks on a pod receipt's network section, which the signer builds from what the shared gate kept of the run:
// - the gate restarts (or lets the run's records go to make room for other runs) and then answers with nothing, which
//   the signer used to sign as a confined run that made no connection;
// - the agent buries its real destination under thousands of cheap refused requests, past the records the gate keeps,
//   so it never appears in the receipt;
// - the agent asks for more distinct destinations than the gate counts one by one.
// The signer must sign `confined: false` with a gap, or list the destination, or say the section is not complete.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { mintJobCredential, type JobIdentity } from '../../src/gate/job-credential.ts';
import { podGateNetwork } from '../../src/pod/gate-network.ts';
import { gateRequest, proxyAuth, recordingConnect, startUpstream, tableResolver, type Upstream } from './helpers.ts';

const SECRET = Buffer.from('egress-accounting-secret-0123456789abcdef');
const cred = (who: JobIdentity) => mintJobCredential(SECRET, who, Date.now() + 3600_000);
const who = (run: string): JobIdentity => ({ job: `job-${run}`, run, repo: 'acme/a' });

async function sharedGate(upstream: Upstream): Promise<Gate> {
  const policy = parseGatePolicy({ allow: ['local.test', `127.0.0.2:${upstream.port}`] });
  return startGate({
    policy, tcpPort: 0, connect: recordingConnect().connect,
    resolve: tableResolver({ 'local.test': ['127.0.0.2'] }).resolve,
    clients: { secret: SECRET, maxPerClient: 16, policyFor: () => policy },
  });
}

/** `count` requests for `run` (at most 8 at once), each to the URL `target(i)` gives, answered `status`. */
async function requests(
  gate: Gate, run: string, count: number, target: (i: number) => string, status: number,
): Promise<void> {
  const headers = proxyAuth(cred(who(run)));
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      assert.equal((await gateRequest({ port: gate.port ?? 0 }, target(i), { headers })).status, status);
    }
  };
  await Promise.all(Array.from({ length: 8 }, lane));
}

const evidenceUrl = (gate: Gate, run: string) => ({
  SVC_GATE_EVIDENCE_URL: `http://127.0.0.1:${gate.port}/_job/${cred(who(run))}/_egress`,
});

describe('pod receipt network: what the gate did not see is never signed as confined', () => {
  let upstream: Upstream;
  const gates: Gate[] = [];
  const open = async (): Promise<Gate> => {
    upstream ??= await startUpstream('127.0.0.2');
    const gate = await sharedGate(upstream);
    gates.push(gate);
    return gate;
  };
  after(async () => {
    for (const gate of gates) await gate.close();
    await upstream?.close();
  });

  it('a gate restarted during the run: not confined, with a gap, before and after the run connects again', async () => {
    const first = await open();
    const started = new Date().toISOString();
    await requests(first, 'r-restart', 1, () => `http://local.test:${upstream.port}/secret`, 200);
    await first.close();
    const second = await open();
    const unknown = await podGateNetwork(evidenceUrl(second, 'r-restart'), 'r-restart', started);
    assert.equal(unknown?.network.confined, false);
    assert.match(unknown?.problem ?? '', /restarted during the run/);
    assert.equal(unknown?.gaps.length, 1);
    // One connection after the restart: the gate knows the run again, but only since it started.
    await requests(second, 'r-restart', 1, () => 'http://denied.test/', 403);
    const partial = await podGateNetwork(evidenceUrl(second, 'r-restart'), 'r-restart', started);
    assert.equal(partial?.network.confined, false);
    assert.match(partial?.problem ?? '', /restarted during the run/);
    assert.equal(partial?.gaps.length, 1);
  });

  it('a run that made no connection through a gate that ran all along: confined, none, with the policy', async () => {
    const gate = await open();
    // The seal is written before the agent starts, so the run starts after the gate did.
    await new Promise((r) => setTimeout(r, 5));
    const started = new Date().toISOString();
    const got = await podGateNetwork(evidenceUrl(gate, 'r-offline'), 'r-offline', started);
    assert.equal(got?.problem, null);
    assert.equal(got?.network.confined, true);
    assert.equal(got?.network.connections, 0);
    assert.deepEqual(got?.gaps, []);
    assert.ok((got?.network.allow.length ?? 0) > 0, 'the policy the gate would have applied is listed');
  });

  it('a run whose records the gate let go for 500 other runs: not confined, with a gap', async () => {
    const gate = await open();
    const started = new Date().toISOString();
    await requests(gate, 'r-victim', 1, () => `http://local.test:${upstream.port}/secret`, 200);
    for (let i = 0; i < 500; i++) await requests(gate, `r-other-${i}`, 1, () => 'http://denied.test/', 403);
    const got = await podGateNetwork(evidenceUrl(gate, 'r-victim'), 'r-victim', started);
    assert.equal(got?.network.confined, false);
    assert.match(got?.problem ?? '', /let the run's records go/);
    assert.equal(got?.gaps.length, 1);
  });

  it('5001 refused requests first do not hide the allowed destination used after them', async () => {
    const gate = await open();
    const started = new Date().toISOString();
    await requests(gate, 'r-bury', 5001, (i) => `http://denied-${i % 7}.test/`, 403);
    await requests(gate, 'r-bury', 1, () => `http://local.test:${upstream.port}/exfil`, 200);
    const got = await podGateNetwork(evidenceUrl(gate, 'r-bury'), 'r-bury', started);
    assert.equal(got?.network.confined, true);
    assert.equal(got?.network.connections, 5002);
    assert.equal(got?.network.denied, 5001);
    assert.deepEqual(got?.network.hosts.map((h) => [h.host, h.connections]), [['local.test', 1]]);
    assert.equal(got?.network.denials.reduce((n, d) => n + d.count, 0), 5001);
    assert.deepEqual(got?.gaps, []);
  });

  it('more distinct destinations than the gate counts: the section says it is not complete', async () => {
    const gate = await open();
    const started = new Date().toISOString();
    await requests(gate, 'r-spread', 501, (i) => `http://spread-${i}.test/`, 403);
    await requests(gate, 'r-spread', 1, () => `http://local.test:${upstream.port}/exfil`, 200);
    const got = await podGateNetwork(evidenceUrl(gate, 'r-spread'), 'r-spread', started);
    assert.equal(got?.network.connections, 502);
    assert.equal(got?.gaps.length, 1);
    assert.match(got?.gaps[0] ?? '', /not fully accounted/);
  });
});
