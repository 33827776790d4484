// End to end in one process: a job's connections go through a shared gate under its credential, the run container
// leaves its evidence (and a network claim of its own in the run folder, which the agent could write), and the pod
// signer signs a receipt whose network section is what the gate saw — confined, with the run's hosts and denials —
// and leaves the gate's records as egress events and egress.jsonl; a run the gate metered past the max_usd its
// credential names ends stopped at its budget, whatever it reported. The Control Plane is a loopback stand-in.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { mintJobCredential } from '../../src/gate/job-credential.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import { writeSeal } from '../../src/pod/seal.ts';
import { signRun } from '../../src/pod/sign.ts';
import {
  gateConnect, gateRequest, proxyAuth, recordingConnect, startUpstream, tableResolver, type Upstream,
} from './helpers.ts';
import { modelRoute } from '../../src/gate/model-apis.ts';
import { sharedMeter } from '../../src/gate/main.ts';
import { RunSpend } from '../../src/gate/budgets.ts';
import { waitFor } from '../helpers/wait-for.ts';

const GIT_ENV = { GIT_AUTHOR_NAME: 'T', GIT_AUTHOR_EMAIL: 't@x', GIT_COMMITTER_NAME: 'T', GIT_COMMITTER_EMAIL: 't@x' };
const SECRET = Buffer.from('pod-signer-network-secret-0123456789abcdef');
const RUN = 'r-gate1';

function git(cwd: string, args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...GIT_ENV } }).trim();
}

/** The pod's workspace for `run` under `root/name`: sealed at its base, then the agent's commit and run folder. */
function prepareWorkspace(
  root: string, name: string, run: string, claims: Record<string, unknown> = {}, reported: Record<string, unknown> = {},
): string {
  const origin = join(root, `${name}-origin`);
  mkdirSync(join(origin, '.svc'), { recursive: true });
  git(origin, ['init', '-q', '-b', 'main']);
  writeFileSync(join(origin, '.svc', 'policy.json'), JSON.stringify({ checks: [{ name: 'test', run: ['true'] }] }));
  writeFileSync(join(origin, 'f.txt'), '1\n');
  git(origin, ['add', '-A']);
  git(origin, ['commit', '-qm', 'base']);
  const ws = join(root, name);
  git(root, ['clone', '-q', `file://${origin}`, ws]);
  const sealed = join(root, `${name}-sealed`);
  mkdirSync(sealed);
  writeSeal(ws, sealed, join(root, `${name}-handoff.json`));
  git(ws, ['checkout', '-qb', `svc/${run}`]);
  writeFileSync(join(ws, 'f.txt'), '1\nfixed\n');
  git(ws, ['commit', '-qam', 'agent']);
  const runFolder = join(ws, '.svc', 'runs', run);
  mkdirSync(join(runFolder, 'artifacts'), { recursive: true });
  writeFileSync(join(runFolder, 'state.json'), JSON.stringify({
    run, source: 'k8s', status: 'running', head_sha: git(ws, ['rev-parse', 'HEAD']), ...claims,
  }));
  writeFileSync(join(runFolder, 'artifacts', 'evidence.json'), JSON.stringify({
    type: 'svc.run_evidence', version: 1, run, outcome: 'finished', error: null, exit_code: 0,
    checks: [{ name: 'test', argv: ['true'], required: true, exit_code: 0, duration_ms: 1, output_sha256: '' }],
    ...reported,
  }));
  // What the agent might plant: a log claiming a connection the gate never saw.
  writeFileSync(join(runFolder, 'artifacts', 'egress.jsonl'), '{"host":"planted.example","decision":"allowed"}\n');
  return ws;
}

describe('pod signer network section', () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-pod-gate-'));
  let upstream: Upstream;
  let gate: Gate;
  let control: Server;
  let controlUrl = '';
  let model: Server;
  const egressLog: EgressRecord[] = [];
  /** Answers of `/v1/held` calls, which the model stand-in keeps under way until the test sends them. */
  const held: Array<() => void> = [];
  /** Runs the Control Plane stand-in says a stop was asked for (ingest's `stop_asked`), as it does to a signer's move. */
  const stopAsked = new Set<string>();

  before(async () => {
    upstream = await startUpstream('127.0.0.2');
    // A model API answering with usage: 100,000 output tokens of claude-sonnet-4-5 are $1.50 by svc's table; on
    // `/v1/unpriced` the model is one svc has no price for; `/v1/held` answers when the test lets it (`held`);
    // `/v1/nousage/messages` answers without usage (the call is counted at its bounds).
    model = createServer((req, res) => {
      req.resume();
      const answer = (): void => {
        res.writeHead(200, { 'content-type': 'application/json' });
        const name = req.url === '/v1/unpriced' ? 'claude-sonnet-4-5-pro' : 'claude-sonnet-4-5';
        res.end(JSON.stringify({ model: name, usage: { input_tokens: 0, output_tokens: 100_000 } }));
      };
      if (req.url === '/v1/held') held.push(answer);
      else if (req.url === '/v1/nousage/messages') res.writeHead(200).end('{"model":"claude-sonnet-4-5"}');
      else if (req.url === '/v1/messages/count_tokens') res.writeHead(200).end('{"input_tokens":12}');
      else answer();
    });
    await new Promise<void>((r) => model.listen(0, '127.0.0.1', r));
    const modelPort = (model.address() as AddressInfo).port;
    const policy = parseGatePolicy({ allow: ['local.test', `127.0.0.2:${upstream.port}`, `127.0.0.1:${modelPort}`] });
    // The shared gate's own meter (`svc gate serve`'s), with no daily caps.
    const { meter, count } = sharedMeter({});
    gate = await startGate({
      policy, tcpPort: 0, connect: recordingConnect().connect,
      resolve: tableResolver({ 'local.test': ['127.0.0.2'] }).resolve,
      clients: { secret: SECRET, maxPerClient: 8, policyFor: () => policy },
      models: [modelRoute('anthropic', `http://127.0.0.1:${modelPort}`, 'x-api-key', 'k')],
      meter, onRecord: (record) => {
        count(record);
        egressLog.push(record);
      },
    });
    // The Control Plane stand-in takes every batch the signer ships.
    control = createServer((req, res) => {
      const body: Buffer[] = [];
      req.on('data', (chunk: Buffer) => body.push(chunk));
      req.on('end', () => {
        const runs: Array<{ run?: string }> = JSON.parse(Buffer.concat(body).toString() || '{}').runs ?? [];
        const stop_asked = runs.map((r) => r.run).filter((run) => run !== undefined && stopAsked.has(run));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ok: true, stop_asked }));
      });
    });
    await new Promise<void>((r) => control.listen(0, '127.0.0.1', r));
    controlUrl = `http://127.0.0.1:${(control.address() as AddressInfo).port}`;
  });

  after(async () => {
    await gate.close();
    await upstream.close();
    control.closeAllConnections();
    control.close();
    model.closeAllConnections();
    model.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("signs what the gate saw for the run, not what the run folder claims", async () => {
    const credential = mintJobCredential(SECRET, { job: 'j1', run: RUN, repo: 'acme/web' }, Date.now() + 3600_000);
    const at = { port: gate.port ?? 0 };
    assert.equal((await gateRequest(at, `http://local.test:${upstream.port}/x`, { headers: proxyAuth(credential) }))
      .status, 200);
    assert.equal((await gateRequest(at, 'http://elsewhere.test/', { headers: proxyAuth(credential) })).status, 403);
    const ws = prepareWorkspace(root, 'ws', RUN);
    const home = join(root, 'signer-home');
    mkdirSync(home);
    const state = await signRun({
      run: RUN, source: 'k8s', workspace: ws, sealedDir: join(root, 'ws-sealed'), pr: false, say: () => {},
      env: {
        PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: controlUrl,
        SVC_GATE_EVIDENCE_URL: `http://127.0.0.1:${gate.port}/_job/${credential}/_egress`,
      },
    });
    const dir = join(home, 'work', '.svc', 'runs', RUN);
    const receipt = JSON.parse(readFileSync(join(dir, 'artifacts', 'receipt.json'), 'utf8'));
    assert.equal(receipt.network.confined, true, JSON.stringify(state));
    assert.equal(receipt.network.connections, 2);
    assert.equal(receipt.network.denied, 1);
    assert.deepEqual(receipt.network.hosts.map((h: { host: string }) => h.host), ['local.test']);
    assert.equal(receipt.network.denials[0].host, 'elsewhere.test');
    assert.ok(receipt.attestation.verified.includes('network'));
    const log = readFileSync(join(dir, 'artifacts', 'egress.jsonl'), 'utf8');
    assert.doesNotMatch(log, /planted/);
    assert.equal(log.trim().split('\n').length, 2);
    const events = readFileSync(join(dir, 'events.jsonl'), 'utf8').split('\n').filter((l) => l.includes('"egress"'));
    assert.equal(events.length, 2);
  });

  it('signs the cost the gate metered, the run container\'s report beside it, whatever its state.json claims', async () => {
    const run = 'r-metered';
    const credential = mintJobCredential(SECRET, { job: 'j-m', run, repo: 'acme/web' }, Date.now() + 3600_000);
    const at = { port: gate.port ?? 0 };
    assert.equal((await gateRequest(at, `/_job/${credential}/_model/anthropic/v1/messages`, { method: 'POST', body: '{}' }))
      .status, 200);
    // The agent's claims: nothing spent, and a "metered" figure of its own.
    const forged = { cost_usd: 0, tokens_in: 0, tokens_out: 0, calls: 9, unpriced: 0, unknown: 0 };
    const ws = prepareWorkspace(root, 'ws-m', run, { cost_usd: 0, reported: { cost_usd: 0, tokens_in: 5, tokens_out: 5 },
      metered: forged });
    const home = join(root, 'signer-home-m');
    mkdirSync(home);
    await signRun({
      run, source: 'k8s', workspace: ws, sealedDir: join(root, 'ws-m-sealed'), pr: false, say: () => {},
      env: {
        PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: controlUrl,
        SVC_GATE_EVIDENCE_URL: `http://127.0.0.1:${gate.port}/_job/${credential}/_egress`,
      },
    });
    const dir = join(home, 'work', '.svc', 'runs', run);
    const receipt = JSON.parse(readFileSync(join(dir, 'artifacts', 'receipt.json'), 'utf8'));
    assert.equal(receipt.cost.source, 'metered');
    assert.equal(receipt.cost.usd, 1.5);
    assert.deepEqual(receipt.cost.metered, { cost_usd: 1.5, tokens_in: 0, tokens_out: 100_000, calls: 1, unpriced: 0,
      unknown: 0, tunnels: 0 });
    assert.deepEqual(receipt.cost.reported, { cost_usd: 0, tokens_in: 5, tokens_out: 5 });
    assert.ok(receipt.attestation.verified.includes('cost'));
    assert.ok(receipt.attestation.reported.includes('cost.reported'));
    const state = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8'));
    assert.equal(state.cost_usd, 1.5);
  });

  it('signs not confined, with a gap, when the gate restarted during the run (saw only what came after)', async () => {
    const run = 'r-gate-restart';
    const policy = parseGatePolicy({ allow: ['local.test', `127.0.0.2:${upstream.port}`] });
    const options = {
      policy, tcpPort: 0, connect: recordingConnect().connect,
      resolve: tableResolver({ 'local.test': ['127.0.0.2'] }).resolve,
      clients: { secret: SECRET, maxPerClient: 8, policyFor: () => policy },
    };
    const credential = mintJobCredential(SECRET, { job: 'j2', run, repo: 'acme/web' }, Date.now() + 3600_000);
    const first = await startGate(options);
    const ws = prepareWorkspace(root, 'ws-restart', run);
    const target = `http://local.test:${upstream.port}/before-restart`;
    const headers = proxyAuth(credential);
    assert.equal((await gateRequest({ port: first.port ?? 0 }, target, { headers })).status, 200);
    await first.close();
    const restarted = await startGate(options);
    try {
      // One connection after the restart: the new gate knows the run, but only since it started.
      const after = { port: restarted.port ?? 0 };
      assert.equal((await gateRequest(after, 'http://elsewhere.test/', { headers })).status, 403);
      const home = join(root, 'signer-home-restart');
      mkdirSync(home);
      const said: string[] = [];
      await signRun({
        run, source: 'k8s', workspace: ws, sealedDir: join(root, 'ws-restart-sealed'), pr: false,
        say: (text) => said.push(text),
        env: {
          PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: controlUrl,
          SVC_GATE_EVIDENCE_URL: `http://127.0.0.1:${restarted.port}/_job/${credential}/_egress`,
        },
      });
      const dir = join(home, 'work', '.svc', 'runs', run);
      const receipt = JSON.parse(readFileSync(join(dir, 'artifacts', 'receipt.json'), 'utf8'));
      assert.equal(receipt.network.confined, false);
      assert.equal(receipt.network.connections, 0, 'nothing is vouched for from a partial record');
      assert.equal(receipt.verdict, 'verified_with_gaps');
      assert.ok(receipt.gaps.some((g: string) => /network is not accounted for.*restarted/.test(g)), receipt.gaps);
      assert.ok(said.some((line) => /restarted during the run/.test(line)));
    } finally {
      await restarted.close();
    }
  });

  // In a pod the run container's class is the agent's to write: a CLI said not to be logged in, whose model the gate
  // saw answer, was logged in after all; and a gate that could not account for the run vouches for nothing.
  it("takes the run container's class config only while the gate saw no model call for the run", async () => {
    const error = 'Provider claude is not logged in: run `claude` and /login as the user svc runs as';
    const classOf = async (run: string, modelCall: boolean, evidenceUrl?: string) => {
      const credential = mintJobCredential(SECRET, { job: `j-${run}`, run, repo: 'acme/web' }, Date.now() + 3600_000);
      const at = { port: gate.port ?? 0 };
      const res = modelCall
        ? await gateRequest(at, `/_job/${credential}/_model/anthropic/v1/messages`, { method: 'POST', body: '{}' })
        : await gateRequest(at, `http://local.test:${upstream.port}/x`, { headers: proxyAuth(credential) });
      assert.equal(res.status, 200);
      const ws = prepareWorkspace(root, `ws-${run}`, run, {}, { error, failure_class: 'config', exit_code: 1 });
      const home = join(root, `signer-home-${run}`);
      mkdirSync(home);
      const state = await signRun({
        run, source: 'k8s', workspace: ws, sealedDir: join(root, `ws-${run}-sealed`), pr: false, say: () => {},
        env: {
          PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: controlUrl,
          SVC_GATE_EVIDENCE_URL: evidenceUrl ?? `http://127.0.0.1:${gate.port}/_job/${credential}/_egress`,
        },
      });
      assert.equal(state.status, 'failed');
      return state.failure;
    };
    assert.deepEqual(await classOf('r-no-model', false), { class: 'config', reason: error, retryable: false });
    assert.deepEqual(await classOf('r-model-answered', true), { class: 'agent', reason: error, retryable: false });
    // The gate's records could not be read (a closed port): whether the model answered is unknown.
    assert.deepEqual(await classOf('r-gate-unread', false, 'http://127.0.0.1:9/_egress'),
      { class: 'agent', reason: error, retryable: false });
  });
  // The attack: the agent reports a few cents while its calls through the gate cost dollars. The gate holds the run to
  // the max_usd its credential names, on what it metered, and the signer ends the run over budget.
  it('refuses a pod\'s next model call past the max_usd its credential names, and the signer stops the run', async () => {
    const run = 'r-over-budget';
    const credential = mintJobCredential(SECRET, { job: 'j-b', run, repo: 'acme/web', maxUsd: 2 }, Date.now() + 3600_000);
    const call = () => gateRequest({ port: gate.port ?? 0 }, `/_job/${credential}/_model/anthropic/v1/messages`,
      { method: 'POST', body: '{}' });
    const first = await call();
    assert.equal(first.status, 200);
    assert.equal((await call()).status, 200, 'a call under the budget goes through; it ends past it ($3.00)');
    const refused = await call();
    assert.equal(refused.status, 429);
    assert.equal(refused.body, 'svc gate: the run\'s budget of $2.00 is reached (metered $3.00): the run stops here ' +
      '(a pod\'s budget is not raised)\n');
    const denial = egressLog.find((r) => r.run === run && r.decision === 'denied');
    assert.equal(denial?.kind, 'model');
    assert.equal(denial?.status, 429);
    assert.match(denial?.reason ?? '', /^the run's budget of \$2\.00 is reached/);
    // Another run of the same repository is not held to this run's budget.
    const other = mintJobCredential(SECRET, { job: 'j-c', run: 'r-other', repo: 'acme/web', maxUsd: 2 },
      Date.now() + 3600_000);
    assert.equal((await gateRequest({ port: gate.port ?? 0 }, `/_job/${other}/_model/anthropic/v1/messages`,
      { method: 'POST', body: '{}' })).status, 200);
    // The run container's word: finished, a cent spent.
    const ws = prepareWorkspace(root, 'ws-b', run, { cost_usd: 0.01, reported: { cost_usd: 0.01 } });
    const home = join(root, 'signer-home-b');
    mkdirSync(home);
    const state = await signRun({
      run, source: 'k8s', workspace: ws, sealedDir: join(root, 'ws-b-sealed'), pr: false, say: () => {},
      env: {
        PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: controlUrl,
        SVC_GATE_EVIDENCE_URL: `http://127.0.0.1:${gate.port}/_job/${credential}/_egress`,
      },
    });
    assert.equal(state.status, 'stopped');
    assert.equal(state.error, 'Stopped at the max_usd budget: spent $3.00 of $2.00, metered by the gate');
    assert.equal(state.failure?.class, 'budget');
    assert.equal(state.cost_usd, 3);
    const dir = join(home, 'work', '.svc', 'runs', run);
    const receipt = JSON.parse(readFileSync(join(dir, 'artifacts', 'receipt.json'), 'utf8'));
    assert.equal(receipt.cost.usd, 3);
    assert.ok(receipt.gaps.includes('the run failed'), receipt.gaps.join('; '));
    assert.match(readFileSync(join(dir, 'artifacts', 'egress.jsonl'), 'utf8'), /"status":429/);
  });

  /** One metered call ($1.50) of a run held to max_usd $2, after a CONNECT tunnel when `tunnel`; then the signer, the
   * run container reporting $5, asking the gate's records at `evidence` (the gate's own port unless given). */
  async function signReportedOver(run: string, tunnel: boolean, evidence = gate.port ?? 0) {
    const credential = mintJobCredential(SECRET, { job: 'j-r', run, repo: 'acme/web', maxUsd: 2 },
      Date.now() + 3600_000);
    const at = { port: gate.port ?? 0 };
    if (tunnel) {
      const opened = await gateConnect(at, `local.test:${upstream.port}`, proxyAuth(credential));
      assert.ok('socket' in opened, 'the tunnel opened');
      opened.socket.destroy();
    }
    const call = await gateRequest(at, `/_job/${credential}/_model/anthropic/v1/messages`,
      { method: 'POST', body: '{}' });
    assert.equal(call.status, 200);
    await waitFor(() => egressLog.some((r) => r.run === run && r.metered), 'the metered call');
    const ws = prepareWorkspace(root, `ws-${run}`, run, { cost_usd: 5, reported: { cost_usd: 5 } });
    const home = join(root, `signer-home-${run}`);
    mkdirSync(home);
    return signRun({
      run, source: 'k8s', workspace: ws, sealedDir: join(root, `ws-${run}-sealed`), pr: false, say: () => {},
      env: {
        PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: controlUrl,
        SVC_GATE_EVIDENCE_URL: `http://127.0.0.1:${evidence}/_job/${credential}/_egress`,
      },
    });
  }

  // The gate cannot read what a CLI spends through a CONNECT tunnel (its vendor's login): once the run opened one,
  // the run container's report past the budget stops the run though the gate metered less.
  it('stops a pod that opened a CONNECT tunnel at its max_usd on the larger of metered and reported', async () => {
    const state = await signReportedOver('r-reported-over', true);
    assert.equal(state.status, 'stopped');
    assert.equal(state.error, 'Stopped at the max_usd budget: spent $5.00 of $2.00, as the run container reported');
    assert.equal(state.failure?.class, 'budget');
    assert.equal(state.metered?.cost_usd, 1.5, 'the metered cost is the run\'s cost, the report beside it');
    assert.equal(state.metered?.tunnels, 1);
  });

  // Without a tunnel the gate saw and priced every call: the operator's prices decide, not the CLI's own estimate.
  it('holds a pod whose every call the gate metered to the metered cost, not a larger report', async () => {
    const state = await signReportedOver('r-reported-whole', false);
    assert.notEqual(state.status, 'stopped', state.error ?? '');
    assert.equal(state.metered?.cost_usd, 1.5);
    assert.equal(state.metered?.tunnels, 0);
  });

  // The signer and `svc gate serve` roll out apart: a gate from before tunnels were counted answers no `tunnels`, so
  // it may have let one through unseen, and the larger report holds the budget.
  it('stops a pod on the larger report when the gate\'s figures do not count tunnels (an older gate)', async () => {
    const older = createServer((req, res) => {
      void gateRequest({ port: gate.port ?? 0 }, req.url ?? '/').then((answer) => {
        const body = JSON.parse(answer.body) as { metered?: Record<string, unknown> };
        delete body.metered?.tunnels;
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      });
    });
    await new Promise<void>((resolve) => older.listen(0, '127.0.0.1', resolve));
    try {
      const state = await signReportedOver('r-reported-older', false, (older.address() as AddressInfo).port);
      assert.equal(state.status, 'stopped');
      assert.equal(state.error, 'Stopped at the max_usd budget: spent $5.00 of $2.00, as the run container reported');
      assert.deepEqual([state.metered?.cost_usd, state.metered?.tunnels], [1.5, undefined]);
    } finally {
      older.close();
    }
  });

  it('a pod cannot raise its budget: a credential with its budget changed or taken out is refused, nothing spent',
    async () => {
      const run = 'r-raise';
      const who = { job: 'j-r', run, repo: 'acme/web', maxUsd: 1 };
      const credential = mintJobCredential(SECRET, who, Date.now() + 3600_000);
      const [prefix, payload, mac] = credential.split('.');
      const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8'));
      assert.equal(claims.usd, 1, 'the budget is in the signed claims');
      const { usd: _usd, ...without } = claims;
      const at = { port: gate.port ?? 0 };
      const spent = egressLog.filter((r) => r.metered).length;
      for (const forged of [{ ...claims, usd: 1000 }, without]) {
        const tampered = `${prefix}.${Buffer.from(JSON.stringify(forged)).toString('base64url')}.${mac}`;
        const res = await gateRequest(at, `/_job/${tampered}/_model/anthropic/v1/messages`,
          { method: 'POST', body: '{}' });
        assert.equal(res.status, 407);
      }
      assert.equal(egressLog.filter((r) => r.metered).length, spent, 'no refused call reached the model API');
      // Its own credential: one call ($1.50) and the budget of $1 is spent; the next is refused however it is sent.
      assert.equal((await gateRequest(at, `/_job/${credential}/_model/anthropic/v1/messages`,
        { method: 'POST', body: '{}' })).status, 200);
      const again = await gateRequest(at, `/_job/${credential}/_model/anthropic/v1/messages`,
        { method: 'POST', body: '{"max_usd":1000}', headers: { 'x-svc-budget': '1000' } });
      assert.equal(again.status, 429);
    });
  const at = () => ({ port: gate.port ?? 0 });
  const mint = (job: string, maxUsd?: number) =>
    mintJobCredential(SECRET, { job, run: `r-${job}`, repo: 'acme/web', ...(maxUsd ? { maxUsd } : {}) },
      Date.now() + 3600_000);
  const modelCall = (credential: string, path = 'messages') =>
    gateRequest(at(), `/_job/${credential}/_model/anthropic/v1/${path}`, { method: 'POST', body: '{}' });
  /** Until the gate has recorded `n` metered calls of the run (a record is made as the response closes). */
  const metered = (job: string, n: number) =>
    waitFor(() => egressLog.filter((r) => r.run === `r-${job}` && r.metered).length >= n, `${n} metered calls`);

  // The gate keeps the 500 most recently active runs' records; a run's spending is kept apart, so letting the
  // records go neither forgets what the run spent nor refuses it while it is under its budget.
  it('holds a budgeted run to its budget after the gate let its records go to make room', async () => {
    const budgeted = mint('let-go', 2);
    assert.equal((await modelCall(budgeted)).status, 200);
    for (let i = 0; i < 500; i++) {
      const other = { headers: proxyAuth(mint(`busy-${i}`)) };
      assert.equal((await gateRequest(at(), 'http://elsewhere.test/', other)).status, 403);
    }
    const egress = await gateRequest(at(), `/_job/${budgeted}/_egress`);
    assert.equal(JSON.parse(egress.body).evicted, true, 'the records were let go');
    assert.equal((await modelCall(budgeted)).status, 200, 'under its budget ($1.50 of $2.00): the call goes through');
    await metered('let-go', 2);
    const refused = await modelCall(budgeted);
    assert.equal(refused.status, 429);
    assert.match(refused.body, /^svc gate: the run's budget of \$2\.00 is reached \(metered \$3\.00\)/);
  });

  // The attack: the agent calls a model the gate has no price for (or whose usage it cannot read), so that what it
  // spends never counts towards its budget.
  it('refuses a budgeted run\'s next model call once one could not be priced, and the signer stops the run', async () => {
    const credential = mint('unpriced', 100);
    assert.equal((await modelCall(credential, 'unpriced')).status, 200, 'the gate knows only at its end');
    await metered('unpriced', 1);
    const refused = await modelCall(credential);
    assert.equal(refused.status, 429);
    assert.equal(refused.body, 'svc gate: the run\'s budget of $100.00 cannot be kept: model "claude-sonnet-4-5-pro" ' +
      'has no price, so the gate cannot count what the run spent; the run stops here\n');
    const free = mint('unpriced-free');
    assert.equal((await modelCall(free, 'unpriced')).status, 200);
    assert.equal((await modelCall(free)).status, 200, 'a run without a budget has its unpriced calls recorded only');
    const ws = prepareWorkspace(root, 'ws-u', 'r-unpriced');
    const home = join(root, 'signer-home-u');
    mkdirSync(home);
    const state = await signRun({
      run: 'r-unpriced', source: 'k8s', workspace: ws, sealedDir: join(root, 'ws-u-sealed'), pr: false, say: () => {},
      env: {
        PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: controlUrl,
        SVC_GATE_EVIDENCE_URL: `http://127.0.0.1:${gate.port}/_job/${credential}/_egress`,
      },
    });
    assert.equal(state.status, 'stopped');
    assert.equal(state.error, 'Stopped at the max_usd budget of $100.00: the gate could not price 1 model call(s)');
    assert.equal(state.failure?.class, 'budget');
  });

  // The attack: a key the gate cannot read for certain (`"\u006e": 128` could be 128 answers), in a call whose usage
  // never comes, so that it counts at bounds lower than what it cost.
  it('refuses a budgeted run\'s next model call once one was counted in doubt, and the signer stops the run',
    async () => {
    const credential = mint('doubted', 100);
    const hidden = await gateRequest(at(), `/_job/${credential}/_model/anthropic/v1/nousage/messages`,
      { method: 'POST', body: '{"model":"claude-sonnet-4-5","max_tokens":9,"\\u006e":128}' });
    assert.equal(hidden.status, 200);
    await metered('doubted', 1);
    assert.equal((await modelCall(credential)).status, 429);
    const ws = prepareWorkspace(root, 'ws-d', 'r-doubted');
    const home = join(root, 'signer-home-d');
    mkdirSync(home);
    const state = await signRun({
      run: 'r-doubted', source: 'k8s', workspace: ws, sealedDir: join(root, 'ws-d-sealed'), pr: false, say: () => {},
      env: {
        PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: controlUrl,
        SVC_GATE_EVIDENCE_URL: `http://127.0.0.1:${gate.port}/_job/${credential}/_egress`,
      },
    });
    assert.equal(state.status, 'stopped');
    assert.equal(state.error, 'Stopped at the max_usd budget of $100.00: the gate could not count 1 model call(s) ' +
      'for certain');
    assert.equal(state.failure?.class, 'budget');
    assert.equal(state.metered?.doubtful, 1);
  });

  // What CLIs do in ordinary work: count tokens and list models. Those answers carry no usage and cost nothing; metered,
  // they would read as calls the gate could not price and stop every budgeted run.
  it('lets a budgeted run count tokens and list models without stopping it', async () => {
    const credential = mint('free-calls', 100);
    assert.equal((await modelCall(credential, 'messages/count_tokens')).status, 200);
    const listed = await gateRequest(at(), `/_job/${credential}/_model/anthropic/v1/models`, { method: 'GET' });
    assert.equal(listed.status, 200);
    assert.equal((await modelCall(credential)).status, 200, 'the next model call is not refused');
    await metered('free-calls', 1);
    const records = egressLog.filter((r) => r.run === 'r-free-calls');
    assert.equal(records.length, 3);
    assert.deepEqual(records.filter((r) => r.metered).map((r) => r.metered?.unknown), [null]);
  });

  // The attack: many calls started at once, each passing the budget check before any has ended and been priced.
  it('lets a budgeted run have two model calls under way; a third is refused 429 with Retry-After', async () => {
    const credential = mint('in-flight', 100);
    const first = modelCall(credential, 'held');
    const second = modelCall(credential, 'held');
    await waitFor(() => held.length === 2, 'two calls under way');
    const third = await modelCall(credential);
    assert.equal(third.status, 429);
    assert.equal(third.headers['retry-after'], '1');
    assert.equal(third.body, 'svc gate: this run has 2 model calls under way (its budget\'s bound)\n');
    assert.equal((await modelCall(mint('in-flight-other', 100))).status, 200, 'another run is not held by these');
    for (const answer of held.splice(0)) answer();
    assert.deepEqual([(await first).status, (await second).status], [200, 200]);
    await metered('in-flight', 2);
    assert.equal((await modelCall(credential)).status, 200, 'once they ended, the next goes through');
  });

  // The attack: the run container's state.json is the agent's to write. A run that ends any other way than signed and
  // judged (a stop asked before the signer signed, no evidence left) showed its report as the cost, and stored it
  // for stats, while every budget reads the gate's records: every ending states the gate's metered cost.
  it('states the gate\'s metered cost on every ending, a stopped run and one without evidence too', async () => {
    for (const [job, status] of [['cost-stopped', 'stopped'], ['cost-no-evidence', 'failed']] as const) {
      const run = `r-${job}`;
      const credential = mint(job);
      assert.equal((await modelCall(credential)).status, 200);
      await metered(job, 1);
      const reported = { cost_usd: 0.01, tokens_in: 2, tokens_out: 3 };
      const ws = prepareWorkspace(root, `ws-${job}`, run, { cost_usd: 0.01, reported });
      if (status === 'stopped') stopAsked.add(run);
      else rmSync(join(ws, '.svc', 'runs', run, 'artifacts', 'evidence.json'));
      const home = join(root, `signer-home-${job}`);
      mkdirSync(home);
      const state = await signRun({
        run, source: 'k8s', workspace: ws, sealedDir: join(root, `ws-${job}-sealed`), pr: false, say: () => {},
        env: {
          PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: controlUrl,
          SVC_GATE_EVIDENCE_URL: `http://127.0.0.1:${gate.port}/_job/${credential}/_egress`,
        },
      });
      assert.equal(state.status, status, state.error ?? '');
      assert.equal(state.verdict, null, 'no receipt is signed');
      assert.deepEqual([state.cost_usd, state.tokens_in, state.tokens_out], [1.5, 0, 100_000], job);
      assert.deepEqual(state.metered, { cost_usd: 1.5, tokens_in: 0, tokens_out: 100_000, calls: 1, unpriced: 0,
        unknown: 0, tunnels: 0 });
      assert.deepEqual(state.reported, reported);
      const dir = join(home, 'work', '.svc', 'runs', run);
      assert.equal(JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')).cost_usd, 1.5, 'as it is shipped');
      assert.match(readFileSync(join(dir, 'artifacts', 'egress.jsonl'), 'utf8'), /"kind":"model"/);
    }
  });

  it('drops a run\'s spending once its credential has expired, when the next run arrives', () => {
    const spend = new RunSpend();
    spend.of('r-old', 1_000, 0).usd = 1;
    spend.of('r-live', 5_000, 0).usd = 2;
    spend.of('r-new', 9_000, 2_000);
    assert.equal(spend.of('r-live', 0, 2_000).usd, 2, 'kept while its credential lasts');
    assert.equal(spend.of('r-old', 0, 2_000).usd, 0, 'dropped: a new entry');
  });
});
